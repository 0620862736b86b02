"""The platform's own long-running jobs in the background (the API, the speed layer).

They are processes of the one supervisor (stack.supervisor), like the infrastructure services:
started detached, found by a pid file that also records the start time, recognised by their command
line before any signal, stopped with SIGTERM (each job stops cleanly on it) and SIGKILL of the
process group as a last resort. What this module adds is the command line's messages.
"""

from __future__ import annotations

import sys
from pathlib import Path

from config.settings import Settings
from stack.supervisor import Supervised


def pid_file(settings: Settings, name: str) -> Path:
    return settings.run_dir / f"{name}.pid"


MODULES = {"speed": "speed_layer"}
"""The module a job runs, where it is not the job's name (``api`` runs ``-m api``)."""


def supervised(settings: Settings, name: str) -> Supervised:
    """The job ``name``; its signature is ``-m <module>``, in every command line the job runs
    (``python -m api run --host ...``, ``python -m speed_layer run``)."""
    return Supervised(name, pid_file(settings, name), f"-m {MODULES.get(name, name)} ")


def running_pid(settings: Settings, name: str) -> int | None:
    """The pid of the background job ``name``, if it is alive and is the one we started."""
    return supervised(settings, name).pid()


def start(settings: Settings, name: str, module_args: list[str]) -> int:
    """Run ``python -m <module_args>`` detached; output to the var dir's log folder."""
    job = supervised(settings, name)
    pid = job.pid()
    if pid is not None:
        print(f"{name} is already running (pid {pid})")
        return pid
    argv = [sys.executable, "-m", *module_args]
    if job.signature not in " ".join([*argv, ""]):
        raise ValueError(f"job {name} must run `-m {MODULES.get(name, name)}`, not {module_args}")
    log = settings.log_dir / f"{name}.out"
    proc = job.start(argv, log)
    print(f"{name} started (pid {proc.pid}); output: {log}")
    return proc.pid


def stop(settings: Settings, name: str, timeout: float = 60.0) -> bool:
    """SIGTERM, wait, then SIGKILL; returns whether the job was running."""
    stopped = supervised(settings, name).stop(timeout)
    if stopped is None:
        print(f"{name} is not running")
        return False
    if stopped.killed:
        print(f"{name} did not stop within {timeout:.0f} s: killed it")
    print(f"{name} stopped (pid {stopped.pid})")
    return True
