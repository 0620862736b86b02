"""Chaos in the suite: six faults at seeded random moments while traffic flows (kill -9 of the speed
layer, of batch runs mid-way, of Kafka, Redis and FerretDB), only the keeper, the services' restart
and the next scheduled batch run to recover; then every bucket of every view equals the recount.
The seed and each fault's moment are logged (and in the failure message); ``make soak`` runs the
long version (tests.chaos)."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest

from config.settings import Settings
from stack import control
from tests import chaos
from tests.integration.conftest import assert_merged_matches, assert_merged_visits_match, isolated_platform
from tests.integration.speed_layer.test_speed_layer import wait_caught_up
from tests.oracle import recount

FAULTS, SECONDS = 6, 40.0
"""Faults and seconds of traffic: what the suite's time allows (``make soak`` runs long)."""


def test_faults_with_traffic_flowing_leave_every_view_exact(
    stack: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chaos")
    seed = random.SystemRandom().randrange(2**31)
    with isolated_platform(stack, tmp_path, redis_db=6, speed_trigger_s=0.5) as settings:
        try:
            report = chaos.run(
                settings,
                faults=FAULTS,
                seconds=SECONDS,
                rate=200,
                batch_every_s=25.0,
                seed=seed,
                wait_for=lambda s, timeout: wait_caught_up(s, timeout),
            )
        finally:
            chaos.stop_speed(settings)
            control.up(stack)  # whatever a late fault left down, for the tests that follow
        happened = f"seed {seed}: " + "; ".join(f"{f.kind} at {f.at_s} s ({f.detail})" for f in report.faults)
        assert len(report.faults) == FAULTS and report.events_sent > SECONDS * 200 / 2, happened
        # The last scheduled run recovered everything.
        assert report.batch_exit_codes[-1] == 0, f"{happened}; batch exit codes {report.batch_exit_codes}"
        # Two kills at nearly the same moment can hit the same process: count the processes killed.
        killed = {
            f.detail for f in report.faults if f.kind == "speed" and f.detail.startswith("speed layer pid")
        }
        assert report.speed_restarts >= len(killed), happened  # the keeper brought it back each time
        try:
            events = chaos.log_events(settings)
            assert_merged_matches(settings, recount(events))
            assert_merged_visits_match(settings, events)
        except AssertionError as exc:
            raise AssertionError(f"{happened}\n{exc}") from exc
