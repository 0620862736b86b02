"""Schemathesis against the running API (uvicorn, real services behind it): inputs generated from
the OpenAPI document never cause a 5xx other than the documented ones, and every answer conforms
to the document. A few examples per operation keep it fast."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from config.settings import Settings
from tests.conftest import PORT_OFFSET, ROOT
from tests.integration.conftest import platform_env

PORT = 18300 + PORT_OFFSET


def start_api(settings: Settings, port: int, **env: str) -> subprocess.Popen[bytes]:
    """``python -m api`` on ``port`` over ``settings``' platform; returns once it answers. Its
    output goes to a file of the var dir (``api-<port>.log``): a pipe nobody reads would fill up
    and stall it."""
    log = settings.log_dir / f"api-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "api"],
        cwd=ROOT,
        env={
            **platform_env(settings),
            "LAMBDA_API_PORT": str(port),
            # No waiting: a generated `wait_ms` after the run posted events no speed layer counts
            # would end in the documented 504 (a wait that ran out), which the 5xx check refuses.
            "LAMBDA_API_MAX_WAIT_MS": "0",
            "LAMBDA_API_DEFAULT_WAIT_MS": "0",
            "LAMBDA_API_RATE_LIMIT": "100000/second",  # the fuzzing is not what the rate limit is for
            **env,
        },
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the API did not come up: {log.read_text()[-3000:]}")
        time.sleep(0.2)


def stop_api(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def api_url(bare: Settings) -> Iterator[str]:
    """The API in open mode (no keys, loopback)."""
    proc = start_api(bare, PORT)
    try:
        yield f"http://127.0.0.1:{PORT}"
    finally:
        stop_api(proc)


SCOPE_ARGS = ("--scope", "read", "--scope", "write", "--scope", "admin")


@pytest.fixture(scope="module")
def keyed_api(bare: Settings) -> Iterator[tuple[str, str]]:
    """The API with keys required, and a key of every scope made by the CLI."""
    done = subprocess.run(
        [sys.executable, "-m", "api", "keys", "add", "--name", "fuzz", *SCOPE_ARGS],
        cwd=ROOT,
        env=platform_env(bare),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    proc = start_api(bare, PORT + 1, LAMBDA_API_AUTH="keys")
    try:
        yield f"http://127.0.0.1:{PORT + 1}", done.stdout.strip()
    finally:
        stop_api(proc)


@pytest.fixture(scope="module")
def api_schema(api_url: str) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{api_url}/openapi.json")


WITH_INPUT = {
    "/v1/pageviews",
    "/v1/unique-visitors",
    "/v1/top-urls",
    "/v1/timeseries",
    "/v1/breakdown",
    "/v1/current-visitors",
    "/v1/events",
    "/api/event",
    "/v2/query",
}
EVERY_PATH = {
    *WITH_INPUT,
    "/v1/dimensions",
    "/v1/status",
    "/healthz",
    "/readyz",
    "/metrics",
}
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def run_generated(
    schema: schemathesis.BaseSchema, base_url: str, mode: GenerationMode, headers: dict[str, str]
) -> dict[str, set[int]]:
    """Generated requests of every operation; the status codes each answered."""
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} == EVERY_PATH
    seen: dict[str, set[int]] = {}
    for operation in operations:
        if mode is GenerationMode.NEGATIVE and operation.path not in WITH_INPUT:
            continue  # no parameters, no body: nothing to make invalid

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def check(case: schemathesis.Case[Any]) -> None:
            response = case.call_and_validate(base_url=base_url, headers=headers, checks=CHECKS)
            seen.setdefault(case.operation.path, set()).add(response.status_code)

        check()
    return seen


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_generated_requests_get_documented_answers(
    api_schema: schemathesis.BaseSchema, api_url: str, mode: GenerationMode
) -> None:
    """Every operation, valid inputs and invalid ones, open mode (no key). (Schemathesis' own
    pytest parametrization does not run under this pytest version; its Python API with Hypothesis
    does the same.)"""
    seen = run_generated(api_schema, api_url, mode, {})
    assert set(seen) == (EVERY_PATH if mode is GenerationMode.POSITIVE else WITH_INPUT)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_generated_requests_with_and_without_a_key(
    api_schema: schemathesis.BaseSchema, keyed_api: tuple[str, str], mode: GenerationMode
) -> None:
    """The same with keys required: with a key of every scope, and without one (every guarded
    route a 401, the probes as before)."""
    url, key = keyed_api
    with_key = run_generated(api_schema, url, mode, {"Authorization": f"Bearer {key}"})
    assert set(with_key) == (EVERY_PATH if mode is GenerationMode.POSITIVE else WITH_INPUT)
    without = run_generated(api_schema, url, mode, {})
    for path, codes in without.items():
        if path not in ("/healthz", "/readyz", "/api/event"):  # collection is public (README)
            assert codes == {401}, (path, codes)


def test_the_api_runs_as_a_module(api_url: str) -> None:
    """`python -m api` (what `make api` runs) served the OpenAPI document and, by now, the
    generated requests of every query route (the metrics count them)."""
    assert httpx.get(f"{api_url}/openapi.json").json()["info"]["title"] == "Lambda analytics API"
    metrics = httpx.get(f"{api_url}/metrics").text
    for route in WITH_INPUT:
        assert f'route="{route}"' in metrics, route
