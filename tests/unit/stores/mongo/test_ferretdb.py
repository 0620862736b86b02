"""The FerretDB issue 4646 workaround leaves any other server alone (stores.mongo.ferretdb)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

from config.settings import Settings
from stores.mongo.ferretdb import ensure_id_indexes, index_name, sqlite_path


def _db(build_info: dict[str, Any]) -> MagicMock:
    db = MagicMock()
    db.name = "lambda"
    db.client.admin.command.return_value = build_info
    return db


def test_noop_on_mongodb(tmp_path: Path) -> None:
    db = _db({"version": "7.0.15", "gitVersion": "abc", "ok": 1.0})
    assert ensure_id_indexes(db, create=["bv_x_g1"], settings=Settings(var_dir=tmp_path)) == []
    db.create_collection.assert_not_called()


def test_ferretdb_elsewhere_only_warns(tmp_path: Path) -> None:
    """FerretDB whose SQLite file is not where the local stack keeps it: collections are created,
    nothing else is touched."""
    db = _db({"version": "7.0.42", "ferretdbVersion": "v1.24.0", "ok": 1.0})
    assert ensure_id_indexes(db, create=["bv_x_g1"], settings=Settings(var_dir=tmp_path)) == []
    db.create_collection.assert_called_once_with("bv_x_g1")
    assert not sqlite_path(Settings(var_dir=tmp_path), "lambda").exists()


def test_names() -> None:
    assert sqlite_path(Settings(var_dir=Path("v")), "lambda") == Path("v/ferretdb/lambda.sqlite")
    assert index_name("bv_top_g3_0a1b2c3d") == "bv_top_g3_0a1b2c3d_ferretdb4646_id"
