"""The platform's own long-running jobs in the background: started detached, found by pid file,
stopped with SIGTERM (each job stops cleanly on it) and SIGKILL as a last resort.

The streaming job and the API use this; the infrastructure services have their own control
(stack.control) because they also need probes and data directories.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from config.settings import Settings


def pid_file(settings: Settings, name: str) -> Path:
    return settings.run_dir / f"{name}.pid"


def running_pid(settings: Settings, name: str) -> int | None:
    """The pid of the background job ``name``, if it is alive."""
    try:
        pid = int(pid_file(settings, name).read_text().strip())
        os.kill(pid, 0)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    return pid


def start(settings: Settings, name: str, module_args: list[str]) -> int:
    """Run ``python -m <module_args>`` detached; output to the var dir's log folder."""
    pid = running_pid(settings, name)
    if pid is not None:
        print(f"{name} is already running (pid {pid})")
        return pid
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    settings.log_dir.mkdir(parents=True, exist_ok=True)
    log = settings.log_dir / f"{name}.out"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", *module_args], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    pid_file(settings, name).write_text(str(proc.pid))
    print(f"{name} started (pid {proc.pid}); output: {log}")
    return proc.pid


def stop(settings: Settings, name: str, timeout: float = 60.0) -> bool:
    """SIGTERM, wait, then SIGKILL; returns whether the job was running."""
    pid = running_pid(settings, name)
    if pid is None:
        pid_file(settings, name).unlink(missing_ok=True)
        print(f"{name} is not running")
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        print(f"{name} did not stop within {timeout:.0f} s: killing it")
        os.killpg(pid, signal.SIGKILL)
    pid_file(settings, name).unlink(missing_ok=True)
    print(f"{name} stopped (pid {pid})")
    return True
