"""Named checkpoints in a batch run, where crash tests can hold the process to kill it.

With ``LAMBDA_BATCH_PAUSE_AT=<name>`` the run announces ``PAUSED AT <name>`` on stdout at that
checkpoint and waits to be killed, or for SIGUSR1 to go on. This makes "kill -9 during the absorb"
and "a run paused past its lease" deterministic tests instead of races against a timer. Unset
(always, outside tests), a checkpoint costs nothing.
"""

from __future__ import annotations

import signal
import sys
import threading

from config.settings import Settings

CHECKPOINTS = ("opened", "absorbed", "writing", "written", "switching")


def checkpoint(settings: Settings, name: str) -> None:
    assert name in CHECKPOINTS, name
    if settings.batch_pause_at != name:
        return
    resume = threading.Event()
    signal.signal(signal.SIGUSR1, lambda _signum, _frame: resume.set())
    print(f"PAUSED AT {name}", flush=True)
    sys.stderr.flush()
    while not resume.wait(0.5):  # wakes up so that the signal's handler runs in this thread
        pass
    print(f"RESUMED AT {name}", flush=True)
