"""WORKAROUND for FerretDB issue 4646: an SQLite index that FerretDB's ``_id`` lookups can use.

FerretDB 1.24 (SQLite backend) answers ``find({"_id": <string or ObjectId>})`` with

    SELECT _ferretdb_sjson FROM "<table>" WHERE _ferretdb_sjson->'$._id' = ?

but the unique index it creates for ``_id`` is on ``_ferretdb_sjson->"_id"``. Both expressions
give the same value, yet SQLite matches index expressions by their text, so the query never uses
the index and every read by ``_id`` scans the whole collection: 2.3 s p50 for one document of a
63,000-document collection. Upstream: https://github.com/FerretDB/FerretDB/issues/4646 (the
PostgreSQL backend has the same defect).

The workaround adds, next to FerretDB's own index, a plain (non-unique) SQLite index on exactly
FerretDB's query expression. FerretDB does not know about it (its metadata lists only its own
indexes, uniqueness stays enforced by its own index) and SQLite drops it with the table when the
collection is dropped. The query plan turns from SCAN into SEARCH; a read takes ~2 ms.

It is a no-op unless the server is FerretDB (``buildInfo`` names a ``ferretdbVersion``) and its
SQLite file for the database is on this machine where the local stack keeps it
(``<var_dir>/ferretdb/<db>.sqlite``, see stack.services.FerretDB): a real MongoDB, or a FerretDB
elsewhere, is left alone (the latter with a warning).

To drop the workaround once FerretDB is fixed: delete this module and its one call in
stores.mongo.writer.MongoBatchWriter.write; existing indexes are harmless and go with their
collections (or run ``DROP INDEX`` on every ``*_ferretdb4646_id`` index). See docs/ferretdb.md.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pymongo.database import Database
from pymongo.errors import CollectionInvalid

from config.settings import Settings, get_settings

log = logging.getLogger(__name__)

UPSTREAM_ISSUE = "https://github.com/FerretDB/FerretDB/issues/4646"
ID_EXPRESSION = "_ferretdb_sjson->'$._id'"
"""FerretDB 1.24's ``metadata.IDColumn``: the expression of its ``WHERE`` for ``_id`` lookups."""
INDEX_SUFFIX = "_ferretdb4646_id"
"""Our index is named ``<table><suffix>``; FerretDB names its own ``<table>_<index name>``."""
METADATA_TABLE = "_ferretdb_collections"
"""FerretDB's SQLite table mapping collection names to table names."""
BUSY_TIMEOUT_S = 30.0
"""FerretDB has the file open; a write of ours waits this long for its transactions to end."""


def is_ferretdb(db: Database[Any]) -> bool:
    """Whether the server behind ``db`` is FerretDB (which adds ``ferretdbVersion`` to buildInfo)."""
    info = db.client.admin.command("buildInfo")
    return "ferretdbVersion" in info


def sqlite_path(settings: Settings, db_name: str) -> Path:
    """Where the local stack's FerretDB keeps database ``db_name`` (one SQLite file per database)."""
    from stack.services import FerretDB

    return FerretDB(settings).data_dir / f"{db_name}.sqlite"


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def index_name(table: str) -> str:
    return f"{table}{INDEX_SUFFIX}"


def index_sqlite(path: Path) -> list[str]:
    """Give every FerretDB table in the SQLite file at ``path`` the index; returns those created.

    Idempotent and safe while FerretDB runs: it waits for FerretDB's write transactions (busy
    timeout) and skips a collection dropped meanwhile.
    """
    created: list[str] = []
    with contextlib.closing(sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)) as conn:
        tables = [row[0] for row in conn.execute(f"SELECT table_name FROM {_quote(METADATA_TABLE)}")]
        present = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        for table in tables:
            name = index_name(table)
            if name in present:
                continue
            try:
                conn.execute(
                    f"CREATE INDEX IF NOT EXISTS {_quote(name)} ON {_quote(table)} ({ID_EXPRESSION})"
                )
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
                log.debug("%s: table dropped before its index was created", table)
                continue
            created.append(name)
    return created


def ensure_id_indexes(
    db: Database[Any], create: Iterable[str] = (), settings: Settings | None = None
) -> list[str]:
    """On the local stack's FerretDB: create the collections ``create`` (if missing), then give
    every collection of ``db`` the ``_id`` index FerretDB's queries use. Returns the indexes
    created; on any other server (MongoDB) does nothing and returns [].

    Called before a collection is filled, so the index is built as documents arrive (a build on
    an existing 60,000-document collection takes a few seconds and holds FerretDB's writers).
    """
    if not is_ferretdb(db):
        return []
    path = sqlite_path(settings or get_settings(), db.name)
    for name in create:
        with contextlib.suppress(CollectionInvalid):
            db.create_collection(name)
    if not path.is_file():
        log.warning(
            "FerretDB's SQLite file %s is not on this machine: reads by _id will scan whole collections (%s)",
            path,
            UPSTREAM_ISSUE,
        )
        return []
    created = index_sqlite(path)
    if created:
        log.info("FerretDB workaround (%s): created %s", UPSTREAM_ISSUE, ", ".join(created))
    return created
