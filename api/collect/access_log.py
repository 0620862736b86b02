"""Keeps client addresses of collected page views out of the access log.

uvicorn's access log (on by default when uvicorn runs the app from its own command line, as
docker-compose.yml does; ``python -m api --access-log``) writes each request's client address.
The collection endpoint promises that no address is stored, so a filter on the ``uvicorn.access``
logger replaces the address of every ``/api/event`` request with ``-`` before any handler sees it.
"""

from __future__ import annotations

import logging

from api.collect import COLLECT_PATH

ACCESS_LOGGER = "uvicorn.access"


class RedactCollectAddresses(logging.Filter):
    """uvicorn logs ``'%s - "%s %s HTTP/%s" %d'`` with (client, method, path, version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and str(args[2]).startswith(COLLECT_PATH):
            record.args = ("-", *args[1:])
        return True


def install() -> None:
    """Adds the filter to uvicorn's access logger, once per process."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, RedactCollectAddresses) for f in logger.filters):
        logger.addFilter(RedactCollectAddresses())
