"""``python -m speed_layer run | start | stop | status | rebuild``.

- ``run``: the streaming job in the foreground, with a live line (rows/s, batch duration, lag).
- ``start`` / ``stop``: the same job in the background (pid file under the var dir's run folder,
  output in its log folder); ``stop`` ends it between two micro-batches.
- ``rebuild``: after Redis lost realtime data, recreate the active generations' realtime views from
  the log, starting at their cuts, and exit when caught up (the job must be stopped).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from config.logs import configure_logging
from config.settings import Settings, get_settings
from stack import jobs

log = logging.getLogger("speed_layer")
JOB = "speed"


def status(settings: Settings) -> None:
    from speed_layer.progress import stats_line
    from stores.redis.client import connect
    from stores.redis.handshake import speed_commit, speed_stats

    pid = jobs.running_pid(settings, JOB)
    print(f"background job: {'running, pid ' + str(pid) if pid else 'not running'}")
    r = connect(settings, timeout_s=5)
    try:
        commit = speed_commit(r)
        stats = speed_stats(r)
    finally:
        r.close()
    print(f"committed batch {commit.batch_id}, offsets {commit.offsets}")
    if stats:
        print(stats_line(stats))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed_layer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the streaming job in the foreground")
    run.add_argument("--until-caught-up", action="store_true", help="stop once the log end is reached")
    sub.add_parser("start", help="run the streaming job in the background")
    sub.add_parser("stop", help="stop the background job between two micro-batches")
    sub.add_parser("status", help="the background job and the last committed micro-batch")
    sub.add_parser("rebuild", help="rebuild the realtime views from the log (job stopped)")
    args = parser.parse_args(argv)
    settings = get_settings()

    if args.command == "start":
        jobs.start(settings, JOB, ["speed_layer", "run"])
        return 0
    if args.command == "stop":
        jobs.stop(settings, JOB, timeout=90.0)
        return 0
    if args.command == "status":
        status(settings)
        return 0

    configure_logging("speed.log")
    from speed_layer.commit import RealtimeStateLost
    from speed_layer.job import SpeedJob
    from speed_layer.progress import print_progress
    from stack.waiting import wait_for_services

    try:
        if args.command == "rebuild":
            pid = jobs.running_pid(settings, JOB)
            if pid is not None and pid != os.getpid():
                print(f"stop the speed layer first (pid {pid}): make speed-stop", file=sys.stderr)
                return 2
            SpeedJob(settings).rebuild()
            return 0
        # A start while Kafka, MongoDB or Redis is down waits for them, as the running job does.
        wait_for_services(settings, job="the speed layer")
        SpeedJob(settings).run(available_now=args.until_caught_up, on_progress=print_progress)
        return 0
    except RealtimeStateLost as exc:
        log.error("%s", exc)
        return 3
    except Exception as exc:
        # Raised inside foreachBatch, it arrives wrapped by Spark: find its own line.
        lost = [line for line in str(exc).splitlines() if "RealtimeStateLost:" in line]
        if lost:
            log.error("%s", lost[0].split("RealtimeStateLost:", 1)[1].strip())
            return 3
        raise


if __name__ == "__main__":
    sys.exit(main())
