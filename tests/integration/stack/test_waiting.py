"""Start paths wait for their services: a probe against the real stack, a service that comes up
while the caller waits, and a clear error naming the service that never did."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from config.settings import Settings
from stack import control
from stack.waiting import ServicesUnavailable, wait_for_services


def test_returns_at_once_when_every_service_answers(stack: Settings) -> None:
    started = time.monotonic()
    wait_for_services(stack)
    assert time.monotonic() - started < 5


def test_a_service_that_comes_back_while_the_job_waits(
    stack: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="stack.waiting")
    control.down(stack, ["redis"])
    restart = threading.Timer(3.0, control.up, args=(stack, ["redis"]))
    restart.start()
    try:
        started = time.monotonic()
        wait_for_services(stack, job="the test job")
        assert time.monotonic() - started >= 2.5
    finally:
        restart.join()
        control.up(stack, ["redis"])
    assert "the test job is waiting for redis at 127.0.0.1:" in caplog.text


def test_gives_up_naming_the_service(stack: Settings) -> None:
    nowhere = stack.model_copy(update={"redis_port": 1, "service_wait_s": 2.0})
    with pytest.raises(
        ServicesUnavailable, match=r"the batch run gave up after \d+ s waiting for redis at 127.0.0.1:1/"
    ):
        wait_for_services(nowhere, job="the batch run")
