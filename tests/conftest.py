"""Test session setup: integration tests run against their own local stack on separate ports.

The stack is started with the same code as `make up` (``stack.control.up``), under var/test, so a
developer's own stack and data are never touched, and it is stopped when the session ends.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Two checkouts on one machine can run their suites side by side with different offsets. Under
# pytest-xdist (make test's TEST_WORKERS) every worker process is a test session of its own with a
# stack of its own: its ports are shifted by another 1000 per worker, its data under var/test/<worker>.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
WORKER_INDEX = int(WORKER.removeprefix("gw")) if WORKER.startswith("gw") else 0
PORT_OFFSET = int(os.environ.get("LAMBDA_TEST_PORT_OFFSET", "0")) + 1000 * WORKER_INDEX
TEST_VAR_DIR = ROOT / "var" / "test"
TEST_ENV = {
    "LAMBDA_VAR_DIR": str(TEST_VAR_DIR / WORKER if WORKER else TEST_VAR_DIR),
    "LAMBDA_KAFKA_PORT": str(19092 + PORT_OFFSET),
    "LAMBDA_KAFKA_CONTROLLER_PORT": str(19093 + PORT_OFFSET),
    "LAMBDA_KAFKA_HEAP": "768m",
    "LAMBDA_MONGO_PORT": str(37017 + PORT_OFFSET),
    "LAMBDA_REDIS_PORT": str(16379 + PORT_OFFSET),
    "LAMBDA_SPARK_DRIVER_MEMORY": "2g",
    "LAMBDA_SPARK_SHUFFLE_PARTITIONS": "2",
}
os.environ.update(TEST_ENV)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from config.settings import Settings, get_settings  # noqa: E402
from stack import control  # noqa: E402


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def stack() -> Iterator[Settings]:
    """The running test stack; torn down at the end of the session whoever started it."""
    settings = get_settings()
    assert settings.var_dir.resolve().is_relative_to(TEST_VAR_DIR), "tests must not use the dev stack"
    control.up(settings)
    try:
        yield settings
    finally:
        control.down(settings)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for the whole test session (starting one costs seconds)."""
    from config.spark import spark_session

    session = spark_session(get_settings(), "lambda-tests")
    yield session
    session.stop()


@pytest.fixture
def unique() -> str:
    """A short unique suffix for names a test creates (topics, databases, keys)."""
    return uuid.uuid4().hex[:10]
