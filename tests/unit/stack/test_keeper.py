"""The keeper on real, short-lived Python processes: a job killed with SIGKILL comes back, one that
keeps dying is given up on with the reason, SIGTERM stops it for good, and its log rotates by size."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from stack.keeper import ExitHistory, KeeperState, RestartPolicy
from tests.polling import eventually


class KeptJob:
    """``python -m stack.keeper`` over a one-line Python job, with its var dir under tmp_path."""

    def __init__(self, tmp_path: Path, job: str, **settings: str) -> None:
        self.var = tmp_path / "var"
        env = {
            **os.environ,
            "LAMBDA_VAR_DIR": str(self.var),
            "LAMBDA_JOB_RESTART_BACKOFF_INITIAL_S": "0.05",
            **{f"LAMBDA_{k.upper()}": v for k, v in settings.items()},
        }
        argv = [sys.executable, "-m", "stack.keeper", "--name", "t", "--", sys.executable, "-c", job]
        self.keeper = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def state(self) -> KeeperState | None:
        return KeeperState.read(self.var / "run" / "t.keeper.json")

    def job_pid(self) -> int | None:
        state = self.state()
        return None if state is None else state.job_pid

    def log(self) -> str:
        return (self.var / "log" / "t.out").read_text()

    def close(self) -> None:
        if self.keeper.poll() is None:
            self.keeper.kill()
            self.keeper.wait()
        pid = self.job_pid()
        if pid is not None and psutil.pid_exists(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def kept(tmp_path: Path) -> Iterator[Callable[..., KeptJob]]:
    made: list[KeptJob] = []

    def make(job: str, **settings: str) -> KeptJob:
        made.append(KeptJob(tmp_path, job, **settings))
        return made[-1]

    yield make
    for job in made:
        job.close()


SLEEPER = "import time; print('job up', flush=True); time.sleep(60)"


def test_a_killed_job_is_restarted_and_sigterm_stops_it_for_good(kept: Callable[..., KeptJob]) -> None:
    job = kept(SLEEPER)
    first = eventually(job.job_pid)
    eventually(lambda: True if job.log().splitlines().count("job up") == 1 else None)
    os.kill(first, signal.SIGKILL)
    second = eventually(lambda: pid if (pid := job.job_pid()) not in (None, first) else None)
    state = job.state()
    assert state is not None and (state.restarts, state.last_exit, state.gave_up) == (1, -9, None)
    assert psutil.Process(second).is_running()
    eventually(lambda: True if job.log().splitlines().count("job up") == 2 else None)

    job.keeper.send_signal(signal.SIGTERM)
    assert job.keeper.wait(timeout=20) == 128 + signal.SIGTERM  # the job's own, as a shell says it
    assert not psutil.pid_exists(second) or psutil.Process(second).status() == psutil.STATUS_ZOMBIE
    log = job.log()
    assert log.splitlines().count("job up") == 2
    assert "exited with -9" in log and "restarting in" in log and "stopped (exit" in log
    assert not (job.var / "run" / "t.job.pid").exists()


def test_a_job_that_keeps_dying_is_given_up_on_with_the_reason(kept: Callable[..., KeptJob]) -> None:
    job = kept("import sys; print('failing', flush=True); sys.exit(3)", job_restart_max="2")
    assert job.keeper.wait(timeout=30) == 1
    state = job.state()
    assert state is not None and state.job_pid is None and state.last_exit == 3 and state.restarts == 2
    assert state.gave_up is not None and state.gave_up.startswith("3 exits within 600 s")
    log = job.log()
    assert log.splitlines().count("failing") == 3 and "giving up: 3 exits" in log


def test_the_job_log_rotates_by_size(kept: Callable[..., KeptJob]) -> None:
    lines = "import sys\nfor i in range(3000): print(f'{i:06d} ' + 'x' * 90)\nsys.stdout.flush()"
    job = kept(lines + "\nimport time; time.sleep(60)", log_max_bytes="8192", log_backups="2")
    log_dir = job.var / "log"
    eventually(lambda: True if (log_dir / "t.out.2").exists() else None)
    eventually(lambda: True if "002999" in _text(log_dir / "t.out") else None)
    files = sorted(log_dir.glob("t.out*"))
    assert [f.name for f in files] == ["t.out", "t.out.1", "t.out.2"]
    assert all(f.stat().st_size <= 8192 + 200 for f in files)


def _text(path: Path) -> str:
    """The file's text; empty while a rotation has renamed it and not yet opened the new one."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def test_backoff_doubles_and_the_window_forgets_old_exits() -> None:
    policy = RestartPolicy(max_exits=3, window_s=10.0, backoff_initial_s=1.0, backoff_max_s=5.0)
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    history = ExitHistory(policy)
    assert [history.record(t) for t in (0.0, 1.0, 2.0)] == [1, 2, 3]
    assert history.record(11.5) == 2  # the exits at 0 and 1 s fell out of the window
