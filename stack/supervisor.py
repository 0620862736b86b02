"""The one supervisor of everything the platform runs in the background.

The infrastructure services (Kafka, FerretDB, Redis, the Spark master and workers) and the
platform's own jobs (the API, the speed layer) are all started the same way: detached in a session
of their own (Ctrl-C in the terminal that started them must not stop them), output appended to a
file under the var dir, and a pid file that records the pid *and* the process's start time.

A pid file alone is not proof: after a crash or a reboot the pid may belong to another process. So
before a pid is reported or signalled it must still be ours: the process with that pid started at
the recorded time (psutil's ``create_time``, which the kernel fixes at fork and ``exec`` keeps) and
its command line still contains the signature we started it with. Processes are never looked up
by name.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil
from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

log = logging.getLogger(__name__)

KILL_WAIT_S = 30.0
"""How long to wait for a process to disappear after SIGKILL (it cannot ignore it)."""

START_TIME_TOLERANCE_S = 0.01
"""psutil derives create_time from clock ticks since boot: the same process always gives the same
value; a reused pid would have to come back within this much of the original start to pass."""


@dataclass(frozen=True)
class Stopped:
    """What :meth:`Supervised.stop` did: the pid, and whether SIGTERM was not enough."""

    pid: int
    killed: bool


@dataclass(frozen=True)
class Supervised:
    """One background process: where its pid is recorded and what its command line contains."""

    name: str
    pid_file: Path
    signature: str
    """A string found in the command line of our process (the whole command line may change when a
    launcher script ``exec``s the real program, e.g. spark-class and the JVM)."""

    def start(
        self,
        argv: Sequence[str],
        output: Path,
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Run ``argv`` detached, its stdout and stderr appended to ``output``; record it."""
        output.parent.mkdir(parents=True, exist_ok=True)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        with output.open("ab") as sink:
            proc = subprocess.Popen(
                list(argv),
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=cwd,
                env=env,
            )
        try:
            started = psutil.Process(proc.pid).create_time()
        except psutil.NoSuchProcess:  # gone (and reaped) already: whoever waits on proc sees why
            started = 0.0
        self.pid_file.write_text(f"{proc.pid} {started!r}\n")
        return proc

    def process(self) -> psutil.Process | None:
        """Our process, if the pid file names one that is alive and is still the one we started."""
        try:
            fields = self.pid_file.read_text().split()
            pid = int(fields[0])
            recorded = float(fields[1]) if len(fields) > 1 else None
        except (FileNotFoundError, ValueError, IndexError):
            return None
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            if recorded is not None and abs(proc.create_time() - recorded) > START_TIME_TOLERANCE_S:
                return None
            if self.signature not in " ".join(proc.cmdline()):
                return None
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
        return proc

    def pid(self) -> int | None:
        """The pid of our process, if it runs."""
        proc = self.process()
        return None if proc is None else proc.pid

    def stop(self, timeout: float) -> Stopped | None:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL its whole process group (it leads one: it
        was started in a session of its own, and children it started go with it). The pid file is
        removed either way; None when our process was not running."""
        proc = self.process()
        if proc is None:
            self.pid_file.unlink(missing_ok=True)
            return None
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.terminate()
        killed = not _wait_gone(proc, timeout)
        if killed:
            log.warning("%s (pid %d) ignored SIGTERM for %.0f s; killing it", self.name, proc.pid, timeout)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            if not _wait_gone(proc, KILL_WAIT_S):
                log.error("%s (pid %d) still runs %.0f s after SIGKILL", self.name, proc.pid, KILL_WAIT_S)
        self.pid_file.unlink(missing_ok=True)
        return Stopped(proc.pid, killed)


def _alive(proc: psutil.Process) -> bool:
    """Whether the process still runs. A zombie does not: when its parent is an init that does not
    reap orphans (some containers), it stays one for good."""
    try:
        proc.wait(0)  # collects the exit status when it is our child (tests start them in-process)
    except psutil.TimeoutExpired:
        try:
            return proc.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    return False


def _wait_gone(proc: psutil.Process, timeout: float) -> bool:
    """Poll until the process is gone; False if it still runs after ``timeout`` seconds.

    Polled rather than ``psutil.Process.wait(timeout)``: for a process that is not our child, that
    waits until the pid disappears, which a zombie never does (see :func:`_alive`).
    """
    try:
        Retrying(stop=stop_after_delay(timeout), wait=wait_fixed(0.05), retry=retry_if_result(bool))(
            _alive, proc
        )
    except RetryError:
        return False
    return True
