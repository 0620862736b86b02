"""The retention watch's thresholds: a warning from half the retention, at risk from 80%."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from batch_layer.master import lost_ranges
from ingest.log_retention import RetentionWatch

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
DAY = 86_400.0


def watch(*ages_days: float, retention_days: float | None = 30) -> RetentionWatch:
    return RetentionWatch(
        retention_s=None if retention_days is None else retention_days * DAY,
        oldest_unabsorbed={p: NOW - timedelta(days=a) for p, a in enumerate(ages_days)},
        at=NOW,
    )


def test_nothing_unabsorbed_or_no_retention_is_never_at_risk() -> None:
    for w in (watch(), watch(29, retention_days=None)):
        assert w.warning() is None and w.as_dict()["at_risk"] is False
    assert watch().as_dict()["oldest_unabsorbed_age_s"] is None


def test_the_oldest_partition_decides_warning_from_half_and_risk_from_eighty_percent() -> None:
    assert watch(1, 14).warning() is None
    young = watch(1, 15.5)
    assert young.used is not None and abs(young.used - 15.5 / 30) < 1e-9
    assert young.warning() is not None and "52% of the topic's retention (720 h)" in (young.warning() or "")
    assert young.as_dict()["at_risk"] is False
    assert watch(24.1, 2).as_dict()["at_risk"] is True


def test_lost_ranges_are_the_offsets_deleted_past_what_was_absorbed() -> None:
    assert lost_ranges({0: 100, 1: 50}, {0: 100, 1: 80, 2: 999}) == {1: (50, 80)}
    assert lost_ranges({0: 100}, {0: 20}) == {}
