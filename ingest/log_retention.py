"""How close the records not yet absorbed are to the topic's retention.

Kafka keeps `events` for ``retention.ms`` (30 days by default, one replica); the master dataset is
the long-term copy. Records the batch layer has not absorbed when retention deletes them are lost
for good, so their age is watched: the batch layer warns when the oldest unabsorbed record has
lived half the retention, the status flags it at 80% (:data:`FLAG_AT`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from config.settings import Settings
from contract import utc
from ingest.topics import record_times, retention_ms, watermarks

WARN_AT = 0.5
"""The batch layer logs a warning from this share of the retention on."""
FLAG_AT = 0.8
"""The status flags the log as at risk from this share on."""


@dataclass(frozen=True)
class RetentionWatch:
    retention_s: float | None
    """The topic's retention; None when it keeps records forever."""
    oldest_unabsorbed: dict[int, datetime]
    """Per partition with records not absorbed yet, the log-append time of the oldest of them."""
    at: datetime

    @property
    def oldest_age_s(self) -> float | None:
        if not self.oldest_unabsorbed:
            return None
        return max((self.at - t).total_seconds() for t in self.oldest_unabsorbed.values())

    @property
    def used(self) -> float | None:
        """The oldest unabsorbed record's age as a share of the retention (None: nothing to lose)."""
        age = self.oldest_age_s
        return None if age is None or self.retention_s is None else age / self.retention_s

    def warning(self, threshold: float = WARN_AT) -> str | None:
        age, used = self.oldest_age_s, self.used
        if age is None or used is None or used < threshold or self.retention_s is None:
            return None
        return (
            f"the oldest record not absorbed yet is {age / 3600:.1f} h old, {used:.0%} of the topic's "
            f"retention ({self.retention_s / 3600:.0f} h): run the batch layer now, or raise the "
            "retention, before Kafka deletes records the master dataset lacks"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "retention_s": self.retention_s,
            "oldest_unabsorbed_age_s": None if self.oldest_age_s is None else round(self.oldest_age_s, 1),
            "retention_used": None if self.used is None else round(self.used, 4),
            "at_risk": self.used is not None and self.used >= FLAG_AT,
        }


def watch(settings: Settings, absorbed: dict[int, int], timeout: float = 10.0) -> RetentionWatch:
    """The retention watch of `events` given the offsets absorbed so far (batch_layer.master)."""
    pending = {
        p: first
        for p, (low, high) in watermarks(settings, timeout).items()
        if (first := max(absorbed.get(p, low), low)) < high
    }
    ms = retention_ms(settings, timeout)
    return RetentionWatch(
        retention_s=None if ms < 0 else ms / 1000,
        oldest_unabsorbed=record_times(settings, pending, timeout),
        at=utc.now(),
    )
