"""Logging of the long-running jobs: to stderr and to a file under the var dir's log folder."""

from __future__ import annotations

import logging
import sys

from config.settings import get_settings


def configure_logging(file_name: str) -> None:
    settings = get_settings()
    settings.log_dir.mkdir(parents=True, exist_ok=True)
    fmt = "%(asctime)s %(levelname)s %(name)s %(message)s"
    logging.basicConfig(level=logging.INFO, format=fmt, stream=sys.stderr)
    handler = logging.FileHandler(settings.log_dir / file_name)
    handler.setFormatter(logging.Formatter(fmt))
    logging.getLogger().addHandler(handler)
    for noisy in ("py4j", "pymongo"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
