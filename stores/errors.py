"""What a store raises when it cannot be reached: the callers' cue to degrade, not to fail.

A read half raises :class:`BatchUnavailable` or :class:`RealtimeUnavailable`; the serving layer
answers from what is left (the batch views alone, flagged partial) or not at all, and the API maps
them to 503 (serving_layer re-exports both).
"""

from __future__ import annotations


class StoreUnavailable(RuntimeError):
    """A store could not be reached for now: the caller may try again later."""


class BatchUnavailable(StoreUnavailable):
    """MongoDB did not answer: without batch views no number would be right."""


class RealtimeUnavailable(StoreUnavailable):
    """Redis did not answer: answers fall back to the batch views, flagged partial."""
