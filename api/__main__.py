"""Run the API with uvicorn: ``python -m api [run|start|stop] [--workers N]``.

``run`` (the default) serves in the foreground; ``start`` serves in the background (output in the
var dir's log folder), ``stop`` stops that. Address and port come from settings.
"""

from __future__ import annotations

import argparse
import logging

import uvicorn

from config.settings import get_settings
from stack import jobs


def main(argv: list[str] | None = None) -> int:
    settings = get_settings()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", nargs="?", choices=("run", "start", "stop"), default="run")
    parser.add_argument("--host", default=settings.api_host)
    parser.add_argument("--port", type=int, default=settings.api_port)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--access-log", action="store_true", help="log every request (costs throughput)")
    args = parser.parse_args(argv)
    if args.command == "start":
        jobs.start(settings, "api", ["api", "run", "--host", args.host, "--port", str(args.port)])
        return 0
    if args.command == "stop":
        jobs.stop(settings, "api")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    uvicorn.run(
        "api.app:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        loop="uvloop",
        http="httptools",
        access_log=args.access_log,
        log_level="info",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
