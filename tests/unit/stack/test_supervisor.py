"""The supervisor on real, short-lived Python processes: started detached, recognised, stopped, and
a pid file that names somebody else's process is never signalled."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from stack.supervisor import Supervised

MARK = "lambda-supervisor-test"


def sleeper(before: str = "") -> list[str]:
    """A Python process that runs ``before``, then sleeps; its command line carries MARK (the
    signature)."""
    return [sys.executable, "-c", f"import time\n{before}\ntime.sleep(60)", MARK]


@pytest.fixture
def job(tmp_path: Path) -> Iterator[Supervised]:
    supervised = Supervised("sleeper", tmp_path / "run" / "sleeper.pid", MARK)
    yield supervised
    proc = supervised.process()
    if proc is not None:
        proc.kill()


def test_a_started_process_is_ours_until_it_is_stopped(job: Supervised, tmp_path: Path) -> None:
    proc = job.start(sleeper(), tmp_path / "log" / "sleeper.out")
    assert job.pid() == proc.pid
    assert psutil.Process(proc.pid).pid == proc.pid
    assert job.pid_file.read_text().split()[0] == str(proc.pid)
    stopped = job.stop(timeout=10)
    assert stopped is not None and (stopped.pid, stopped.killed) == (proc.pid, False)
    assert proc.poll() is not None  # gone, and reaped
    assert not job.pid_file.exists()
    assert job.pid() is None
    assert job.stop(timeout=10) is None


def test_a_process_that_ignores_sigterm_is_killed_with_its_group(job: Supervised, tmp_path: Path) -> None:
    out = tmp_path / "sleeper.out"
    # A parent that ignores SIGTERM, and a child of its own in its process group.
    ignore = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)"
    spawn = f"import subprocess; subprocess.Popen({sleeper()!r})"
    job.start(sleeper(f"{ignore}\n{spawn}"), out)
    parent = job.process()
    assert parent is not None
    children = _wait_for_children(parent)
    stopped = job.stop(timeout=0.5)
    assert stopped is not None and stopped.killed
    _, alive = psutil.wait_procs(children, timeout=10)
    assert alive == []


def _wait_for_children(parent: psutil.Process) -> list[psutil.Process]:
    children: list[psutil.Process] = Retrying(
        stop=stop_after_delay(10), wait=wait_fixed(0.05), retry=retry_if_result(lambda c: not c)
    )(parent.children)
    return children


def test_a_reused_pid_is_not_signalled(job: Supervised, tmp_path: Path) -> None:
    """The pid file names a live process with our signature that started at another time: after a
    crash and pid reuse, that is somebody else's process."""
    other = subprocess.Popen(sleeper(), start_new_session=True)
    try:
        started = psutil.Process(other.pid).create_time()
        job.pid_file.parent.mkdir(parents=True)
        job.pid_file.write_text(f"{other.pid} {started - 5.0!r}\n")
        assert job.process() is None
        assert job.stop(timeout=1) is None
        assert other.poll() is None, "somebody else's process was signalled"
        assert not job.pid_file.exists()
    finally:
        other.kill()
        other.wait()


def test_a_pid_file_without_start_time_needs_the_signature(job: Supervised, tmp_path: Path) -> None:
    """An old pid file (the pid alone) naming a process of another command line is not ours."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        job.pid_file.parent.mkdir(parents=True)
        job.pid_file.write_text(f"{other.pid}\n")
        assert job.process() is None
        assert job.stop(timeout=1) is None
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_a_process_that_exited_is_not_running(job: Supervised, tmp_path: Path) -> None:
    proc = job.start([sys.executable, "-c", "pass", MARK], tmp_path / "quick.out")
    proc.wait(10)
    assert job.pid() is None
    assert job.stop(timeout=1) is None


def test_garbage_in_the_pid_file_means_not_running(job: Supervised) -> None:
    job.pid_file.parent.mkdir(parents=True)
    job.pid_file.write_text("not a pid\n")
    assert job.pid() is None
