"""Named checkpoints in a batch run, where crash tests can hold the process to kill it.

With ``LAMBDA_BATCH_PAUSE_AT=<name>`` the run announces ``PAUSED AT <name>`` on stdout at that
checkpoint and waits to be killed. This makes "kill -9 during the absorb" a deterministic test
instead of a race against a timer. Unset (always, outside tests), a checkpoint costs nothing.
"""

from __future__ import annotations

import sys
import time

from config.settings import Settings

CHECKPOINTS = ("opened", "absorbed", "writing", "written")


def checkpoint(settings: Settings, name: str) -> None:
    assert name in CHECKPOINTS, name
    if settings.batch_pause_at != name:
        return
    print(f"PAUSED AT {name}", flush=True)
    sys.stderr.flush()
    while True:
        time.sleep(3600)
