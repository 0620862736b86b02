"""The API started as ``make api-start`` starts it, on the real test stack: killed with SIGKILL, its
keeper brings it back and ``make ps`` says so; ``api stop`` stops it for good."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable

import httpx

from config.settings import Settings
from stack import jobs
from tests.conftest import ROOT
from tests.polling import eventually as poll


def eventually(probe: Callable[[], object | None]) -> object:
    """A process restart on a busy machine takes seconds: poll for a minute."""
    return poll(probe, timeout=60.0, every=0.2)


def _healthy(base: str) -> bool | None:
    try:
        return True if httpx.get(f"{base}/healthz", timeout=2).status_code == 200 else None
    except httpx.HTTPError:
        return None


def test_a_killed_api_is_restarted_by_its_keeper(stack: Settings) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "LAMBDA_API_PORT": str(port), "LAMBDA_JOB_RESTART_BACKOFF_INITIAL_S": "0.2"}
    settings = stack.model_copy(update={"api_port": port})
    base = f"http://127.0.0.1:{port}"

    def command(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )

    started = command("api", "start")
    assert started.returncode == 0 and "restarted if it dies" in started.stdout, started.stderr
    try:
        eventually(lambda: _healthy(base))
        first = jobs.status(settings, "api")
        assert first.state == "up" and first.job_pid is not None and first.restarts == 0
        os.kill(first.job_pid, signal.SIGKILL)
        eventually(
            lambda: True if jobs.status(settings, "api").job_pid not in (None, first.job_pid) else None
        )
        eventually(lambda: _healthy(base))
        again = jobs.status(settings, "api")
        assert (again.keeper_pid, again.restarts, again.last_exit) == (first.keeper_pid, 1, -9)
        ps = command("stack", "ps")
        assert "background jobs" in ps.stdout and "api" in ps.stdout, ps.stdout
        row = next(line for line in ps.stdout.splitlines() if "│ api" in line)
        assert str(again.job_pid) in row and "up" in row and "-9" in row, row
        log = (stack.log_dir / "api.out").read_text()
        assert "exited with -9" in log and "restarting in" in log
    finally:
        stopped = command("api", "stop")
    assert "api stopped" in stopped.stdout, stopped.stdout + stopped.stderr
    final = jobs.status(settings, "api")
    assert (final.keeper_pid, final.job_pid, final.state) == (None, None, "down")
    assert _healthy(base) is None
