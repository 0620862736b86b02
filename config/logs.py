"""Logging of the long-running jobs: to stderr and to a size-rotated file under the var dir's log folder."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

from config.settings import Settings, get_settings

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def rotating_handler(path: Path, settings: Settings) -> logging.Handler:
    """A handler appending to ``path``, rotated past ``log_max_bytes`` with ``log_backups`` kept:
    a job that runs for weeks must not fill the disk with its log."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return logging.handlers.RotatingFileHandler(
        path, maxBytes=settings.log_max_bytes, backupCount=settings.log_backups, encoding="utf-8"
    )


def configure_logging(file_name: str) -> None:
    settings = get_settings()
    logging.basicConfig(level=logging.INFO, format=FORMAT, stream=sys.stderr)
    handler = rotating_handler(settings.log_dir / file_name, settings)
    handler.setFormatter(logging.Formatter(FORMAT))
    logging.getLogger().addHandler(handler)
    for noisy in ("py4j", "pymongo"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
