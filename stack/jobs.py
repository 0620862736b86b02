"""The platform's own long-running jobs in the background (the API, the speed layer).

They are processes of the one supervisor (stack.supervisor), like the infrastructure services:
started detached, found by a pid file that also records the start time, recognised by their command
line before any signal, stopped with SIGTERM (each job stops cleanly on it) and SIGKILL of the
process group as a last resort. Each runs under a keeper (stack.keeper) that restarts it when it
dies and rotates its output; the pid file is the keeper's, the job's own is beside it. What this
module adds is the command line's messages.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from config.settings import Settings
from stack import keeper
from stack.supervisor import Supervised


def pid_file(settings: Settings, name: str) -> Path:
    return settings.run_dir / f"{name}.pid"


NAMES = ("api", "speed")
"""The jobs that run in the background."""

MODULES = {"speed": "speed_layer"}
"""The module a job runs, where it is not the job's name (``api`` runs ``-m api``)."""


def supervised(settings: Settings, name: str) -> Supervised:
    """The job ``name``; its signature is ``-m <module>``, in every command line the job runs
    (``python -m api run --host ...``, ``python -m speed_layer run``)."""
    return Supervised(name, pid_file(settings, name), f"-m {MODULES.get(name, name)} ")


def job_process(settings: Settings, name: str) -> Supervised:
    """The job's own process under its keeper (same signature, its own pid file)."""
    return Supervised(name, keeper.job_pid_file(settings, name), supervised(settings, name).signature)


def running_pid(settings: Settings, name: str) -> int | None:
    """The pid of the background job ``name`` (its keeper's), if it is alive and is the one we
    started; a job whose keeper was killed still counts, so that it is never started twice."""
    return supervised(settings, name).pid() or job_process(settings, name).pid()


@dataclass(frozen=True)
class JobStatus:
    """One background job as ``make ps`` shows it."""

    name: str
    keeper_pid: int | None
    job_pid: int | None
    restarts: int
    last_exit: int | None
    gave_up: str | None

    @property
    def state(self) -> str:
        if self.job_pid is not None:
            return "up"
        if self.keeper_pid is not None:
            return "restarting"
        return "gave up" if self.gave_up else "down"


def status(settings: Settings, name: str) -> JobStatus:
    """The job's keeper and process, and what the keeper recorded (restarts, why it gave up)."""
    keeper_pid = supervised(settings, name).pid()
    state = keeper.KeeperState.read(keeper.state_file(settings, name))
    return JobStatus(
        name=name,
        keeper_pid=keeper_pid,
        job_pid=job_process(settings, name).pid(),
        restarts=state.restarts if state else 0,
        last_exit=state.last_exit if state else None,
        gave_up=state.gave_up if state and keeper_pid is None else None,
    )


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
    keeper.state_file(settings, name).unlink(missing_ok=True)
    proc = job.start(
        [sys.executable, "-m", "stack.keeper", "--name", name, "--", *argv],
        settings.log_dir / f"{name}.keeper.out",
    )
    print(
        f"{name} started (keeper pid {proc.pid}, restarted if it dies); output: {settings.log_dir / name}.out"
    )
    return proc.pid


def stop(settings: Settings, name: str, timeout: float = 60.0) -> bool:
    """SIGTERM, wait, then SIGKILL; returns whether the job was running."""
    stopped = supervised(settings, name).stop(timeout) or job_process(settings, name).stop(timeout)
    if stopped is None:
        print(f"{name} is not running")
        return False
    if stopped.killed:
        print(f"{name} did not stop within {timeout:.0f} s: killed it")
    print(f"{name} stopped (pid {stopped.pid})")
    return True
