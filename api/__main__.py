"""Run the API with uvicorn: ``python -m api [run|start|stop] [--workers N]``; manage its keys:
``python -m api keys add|list|revoke`` (:mod:`api.keys_cli`).

``run`` (the default) serves in the foreground; ``start`` serves in the background (output in the
var dir's log folder), ``stop`` stops that. Address and port come from settings. Without keys
(``LAMBDA_API_AUTH=open``) it serves a loopback address only and refuses any other.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import uvicorn

from api import keys_cli
from api.auth import check_binding, mode_note
from config.settings import get_settings
from stack import jobs


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["keys"]:
        return keys_cli.main(argv[1:])
    settings = get_settings()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", nargs="?", choices=("run", "start", "stop"), default="run")
    parser.add_argument("--host", default=settings.api_host)
    parser.add_argument("--port", type=int, default=settings.api_port)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--access-log", action="store_true", help="log every request (costs throughput)")
    args = parser.parse_args(argv)
    if args.command in ("run", "start"):
        check_binding(settings, args.host)
    if args.command == "start":
        jobs.start(settings, "api", ["api", "run", "--host", args.host, "--port", str(args.port)])
        return 0
    if args.command == "stop":
        jobs.stop(settings, "api")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger(__name__).info("authentication: %s", mode_note(settings))
    os.environ["LAMBDA_API_HOST"] = args.host  # the app (built by uvicorn's factory) checks it too
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
