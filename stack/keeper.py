"""Keeps one of the platform's jobs running: restarts it when it dies, rotates its output by size.

``python -m stack.keeper --name speed -- python -m speed_layer run`` is what ``make speed-start`` and
``make api-start`` run in the background (through :mod:`stack.jobs`): the local equivalent of
compose's ``restart: unless-stopped``. The keeper

- starts the job in a process group of its own, its stdout and stderr piped through the keeper into
  a size-rotated log file; when the job ends, whatever is left of its group (the speed layer's
  Spark JVM, Python workers) is killed before a new one starts, so two drivers never overlap;
- restarts the job whenever it exits without having been asked to stop, after an exponential
  backoff, and gives up after ``job_restart_max`` exits within ``job_restart_window_s``, saying why
  in the log and in its state file (a job that cannot start must not spin);
- on SIGTERM or SIGINT forwards SIGTERM to the job, waits for it, and exits with the job's code;
- records the job's pid (with its start time, as every pid file of the supervisor) and a small JSON
  state (restarts, last exit, whether it gave up) that ``make ps`` and the jobs' ``status`` print.

The job's own exactly-once protocol is what makes a restart safe (the speed layer replays its last
uncommitted micro-batch); the keeper only brings the process back.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO

import psutil

from config.logs import FORMAT, rotating_handler
from config.settings import Settings, get_settings

log = logging.getLogger("stack.keeper")


@dataclass(frozen=True)
class RestartPolicy:
    """When to restart: exponential backoff, and a bound on exits within a sliding window."""

    max_exits: int
    window_s: float
    backoff_initial_s: float
    backoff_max_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> RestartPolicy:
        return cls(
            max_exits=settings.job_restart_max,
            window_s=settings.job_restart_window_s,
            backoff_initial_s=settings.job_restart_backoff_initial_s,
            backoff_max_s=settings.job_restart_backoff_max_s,
        )

    def delay(self, exits_in_window: int) -> float:
        """Seconds to wait before the next start, after the ``exits_in_window``-th recent exit."""
        return min(self.backoff_initial_s * 2.0 ** max(exits_in_window - 1, 0), self.backoff_max_s)


@dataclass
class ExitHistory:
    """The moments the job exited on its own, within the policy's window."""

    policy: RestartPolicy
    moments: deque[float] = field(default_factory=deque)

    def record(self, now: float) -> int:
        """Record an exit at ``now``; the number of exits within the window, this one included."""
        self.moments.append(now)
        while self.moments and now - self.moments[0] > self.policy.window_s:
            self.moments.popleft()
        return len(self.moments)


@dataclass
class KeeperState:
    """What the keeper writes beside the job's pid file for ``make ps`` and ``status``."""

    name: str
    keeper_pid: int
    job_pid: int | None = None
    restarts: int = 0
    last_exit: int | None = None
    """The job's last exit code (negative: the signal that ended it)."""
    last_exit_at: float | None = None
    gave_up: str | None = None
    """Why the keeper stopped restarting, if it did."""

    def write(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> KeeperState | None:
        """The state a keeper wrote, or None when there is none or it does not parse."""
        try:
            return cls(**json.loads(path.read_text()))
        except (FileNotFoundError, ValueError, TypeError):
            return None


def state_file(settings: Settings, name: str) -> Path:
    return settings.run_dir / f"{name}.keeper.json"


def job_pid_file(settings: Settings, name: str) -> Path:
    """The pid file of the job process itself (the keeper's own is :func:`stack.jobs.pid_file`)."""
    return settings.run_dir / f"{name}.job.pid"


def rotating_log(path: Path, settings: Settings) -> logging.Logger:
    """A logger that writes lines as they are to ``path``, rotated by size."""
    handler = rotating_handler(path, settings)
    handler.setFormatter(logging.Formatter("%(message)s"))
    out = logging.getLogger(f"stack.keeper.output.{path.name}")
    out.propagate = False
    out.setLevel(logging.INFO)
    out.handlers[:] = [handler]
    return out


def _pump(stream: IO[bytes], sink: logging.Logger) -> None:
    """Copy the job's output to the rotated log, line by line, until the job closes it."""
    for raw in iter(stream.readline, b""):
        sink.info(raw.decode("utf-8", errors="replace").rstrip("\n"))
    stream.close()


class Keeper:
    """Runs ``argv`` until asked to stop, restarting it under ``policy``."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        settings: Settings,
        policy: RestartPolicy,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.settings = settings
        self.policy = policy
        self.clock = clock
        self.output = rotating_log(settings.log_dir / f"{name}.out", settings)
        self.state = KeeperState(name=name, keeper_pid=os.getpid())
        self.stopping = threading.Event()
        self.job: subprocess.Popen[bytes] | None = None

    def say(self, message: str) -> None:
        """A line of the keeper's own in the job's log (prefixed, so it stands out) and its log."""
        self.output.info("[keeper] %s", message)
        log.info("%s: %s", self.name, message)

    def request_stop(self, signum: int, _frame: FrameType | None = None) -> None:
        """Signal handler: stop restarting and pass SIGTERM on to the job."""
        self.stopping.set()
        job = self.job
        if job is not None and job.poll() is None:
            self.say(f"signal {signal.Signals(signum).name}: stopping the job (pid {job.pid})")
            job.send_signal(signal.SIGTERM)

    def _start(self) -> subprocess.Popen[bytes]:
        job = subprocess.Popen(
            self.argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            started = psutil.Process(job.pid).create_time()
        except psutil.NoSuchProcess:
            started = 0.0
        job_pid_file(self.settings, self.name).write_text(f"{job.pid} {started!r}\n")
        assert job.stdout is not None
        threading.Thread(target=_pump, args=(job.stdout, self.output), daemon=True).start()
        self.state.job_pid = job.pid
        self.state.write(state_file(self.settings, self.name))
        return job

    def run(self) -> int:
        """Keep the job running; returns the job's last exit status, or 1 after giving up."""
        self.settings.run_dir.mkdir(parents=True, exist_ok=True)
        history = ExitHistory(self.policy)
        while True:
            self.job = self._start()
            self.say(f"started {self.name} (pid {self.job.pid}): {' '.join(self.argv)}")
            if self.stopping.is_set():  # a stop that raced with the start
                self.job.send_signal(signal.SIGTERM)
            code = self.job.wait()
            with contextlib.suppress(ProcessLookupError):  # the rest of its group, if any is left
                os.killpg(self.job.pid, signal.SIGKILL)
            self.state.last_exit, self.state.last_exit_at = code, time.time()
            self.state.job_pid = None
            job_pid_file(self.settings, self.name).unlink(missing_ok=True)
            if self.stopping.is_set():
                self.say(f"{self.name} stopped (exit {code})")
                self.state.write(state_file(self.settings, self.name))
                return _exit_status(code)
            exits = history.record(self.clock())
            if exits > self.policy.max_exits:
                self.state.gave_up = (
                    f"{exits} exits within {self.policy.window_s:.0f} s (last exit {code}); "
                    "not restarting: read this log, fix the cause, then start it again"
                )
                self.say(f"giving up: {self.state.gave_up}")
                self.state.write(state_file(self.settings, self.name))
                return 1
            delay = self.policy.delay(exits)
            self.state.restarts += 1
            self.state.write(state_file(self.settings, self.name))
            self.say(
                f"{self.name} exited with {code} ({exits} of at most {self.policy.max_exits} exits "
                f"within {self.policy.window_s:.0f} s); restarting in {delay:.1f} s"
            )
            if self.stopping.wait(delay):
                self.say(f"{self.name} not restarted: asked to stop")
                return _exit_status(code)


def _exit_status(code: int) -> int:
    """A child's return code as a process exit status: a signal N becomes 128 + N, as in a shell."""
    return code if code >= 0 else 128 - code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stack.keeper", description=__doc__)
    parser.add_argument("--name", required=True, help="the job's name (pid and log files)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the job's command line")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("the job's command line is missing (after --)")
    logging.basicConfig(level=logging.INFO, format=FORMAT)
    settings = get_settings()
    keeper = Keeper(args.name, command, settings, RestartPolicy.from_settings(settings))
    signal.signal(signal.SIGTERM, keeper.request_stop)
    signal.signal(signal.SIGINT, keeper.request_stop)
    return keeper.run()


if __name__ == "__main__":
    sys.exit(main())
