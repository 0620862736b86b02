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


@pytest.fixture(scope="module")
def api_url(bare: Settings) -> Iterator[str]:
    env = {
        **platform_env(bare),
        "LAMBDA_API_PORT": str(PORT),
        "LAMBDA_API_MAX_WAIT_MS": "200",  # generated `wait_ms` must not make the run slow
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "api"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{PORT}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "api exited"
            assert time.monotonic() < deadline, "the API did not come up"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def api_schema(api_url: str) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{api_url}/openapi.json")


WITH_INPUT = {"/v1/pageviews", "/v1/unique-visitors", "/v1/top-urls", "/v1/events"}
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_generated_requests_get_documented_answers(
    api_schema: schemathesis.BaseSchema, mode: GenerationMode
) -> None:
    """Every operation, valid inputs and invalid ones. (Schemathesis' own pytest parametrization
    does not run under this pytest version; its Python API with Hypothesis does the same.)"""
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 8
    for operation in operations:
        if mode is GenerationMode.NEGATIVE and operation.path not in WITH_INPUT:
            continue  # no parameters, no body: nothing to make invalid

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def check(case: schemathesis.Case[Any]) -> None:
            case.call_and_validate(checks=CHECKS)

        check()


def test_the_api_runs_as_a_module(api_url: str) -> None:
    """`python -m api` (what `make api` runs) served the OpenAPI document and, by now, the
    generated requests of every query route (the metrics count them)."""
    assert httpx.get(f"{api_url}/openapi.json").json()["info"]["title"] == "Lambda analytics API"
    metrics = httpx.get(f"{api_url}/metrics").text
    for route in WITH_INPUT:
        assert f'route="{route}"' in metrics, route
