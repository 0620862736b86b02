"""FerretDB issue 4646 workaround (stores.mongo.ferretdb): reads by _id must not scan.

These tests run their own FerretDB (no Kafka, no Redis) on a free port under a temporary
directory, so they can fill a collection through SQLite directly (60,000 documents in seconds
instead of minutes through the wire protocol) and restart the server.
"""

from __future__ import annotations

import socket
import sqlite3
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.database import Database

from config.settings import Settings, get_settings
from stack import control
from stores.mongo.ferretdb import (
    ensure_id_indexes,
    index_name,
    is_ferretdb,
    sqlite_path,
)

BIG = 60_000
DB = "wa"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ferret(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    settings = get_settings().model_copy(
        update={"var_dir": tmp_path_factory.mktemp("ferretdb-wa"), "mongo_port": _free_port()}
    )
    control.up(settings, ["ferretdb"])
    try:
        yield settings
    finally:
        control.down(settings, ["ferretdb"])


@pytest.fixture
def db(ferret: Settings) -> Iterator[Database[dict[str, Any]]]:
    client: MongoClient[dict[str, Any]] = MongoClient(
        ferret.mongo_host, ferret.mongo_port, directConnection=True, serverSelectionTimeoutMS=5000
    )
    try:
        yield client[DB]
    finally:
        client.close()


def _table(path: Path, collection: str) -> str:
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT table_name FROM _ferretdb_collections WHERE name = ?", (collection,)
        ).fetchone()
    assert row is not None, collection
    return str(row[0])


def _doc_id(i: int) -> str:
    return f"2026-11-{1 + i % 28:02d}|https://shop.example.com/catalog/item/{i:08d}?ref=home"


def _fill_raw(path: Path, collection: str, template: dict[str, Any], n: int) -> None:
    """Copy FerretDB's stored form of ``template`` n-1 times with other _ids, straight into SQLite."""
    table = _table(path, collection)
    with sqlite3.connect(path, timeout=30, isolation_level=None) as conn:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            f"""WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
            INSERT INTO "{table}"
            SELECT json_set(_ferretdb_sjson, '$._id',
                            printf('2026-11-%02d|https://shop.example.com/catalog/item/%08d?ref=home',
                                   1 + i % 28, i))
            FROM "{table}", n""",
            (n - 1,),
        )
        conn.execute("COMMIT")


def _plan(db: Database[dict[str, Any]], collection: str, doc_id: str) -> str:
    """FerretDB's own EXPLAIN QUERY PLAN (from its SQLite) for a find by _id.

    A read first: SQLite's EXPLAIN starts no transaction, so on a pooled connection that has not
    run a statement since the index was created it plans with the schema it had before (a real
    query notices the schema change and is prepared again).
    """
    db[collection].find_one({"_id": doc_id})
    answer = db.command("explain", {"find": collection, "filter": {"_id": doc_id}})
    return " ".join(str(line) for line in answer["queryPlanner"]["Plan"])


def _read_p50_ms(db: Database[dict[str, Any]], collection: str, ids: list[str]) -> float:
    times = []
    for doc_id in ids:
        start = time.perf_counter()
        doc = db[collection].find_one({"_id": doc_id})
        times.append((time.perf_counter() - start) * 1000)
        assert doc is not None and doc["_id"] == doc_id
    return statistics.median(times)


def _document(i: int) -> dict[str, Any]:
    """A batch view document of the real shape and size (~2.6 KB)."""
    day, key = _doc_id(i).split("|", 1)
    return {
        "_id": _doc_id(i),
        "key": key,
        "day": day,
        "pv": 1234,
        "uv": 567,
        "sk": bytes(range(256)) * 4,
        "h_pv": [i % 50] * 24,
        "h_uv": [i % 20] * 24,
        "h_sk": [bytes(40) if h % 2 else None for h in range(24)],
    }


def test_detects_ferretdb(db: Database[dict[str, Any]]) -> None:
    assert is_ferretdb(db)


def test_big_collection_read_by_id_searches_the_index(
    ferret: Settings, db: Database[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    name = "bv_big_g1"
    db.drop_collection(name)
    db[name].insert_one(_document(0))
    path = sqlite_path(ferret, DB)
    _fill_raw(path, name, _document(0), BIG)
    assert db[name].estimated_document_count() == BIG
    probe = _doc_id(BIG // 2)
    assert "SCAN" in _plan(db, name, probe), "without the workaround FerretDB scans (issue 4646)"

    created = ensure_id_indexes(db, create=[name], settings=ferret)
    assert index_name(_table(path, name)) in created
    plan = _plan(db, name, probe)
    assert "SEARCH" in plan and index_name(_table(path, name)) in plan, plan

    ids = [_doc_id(i) for i in range(1, BIG, BIG // 200)]
    _read_p50_ms(db, name, ids[:20])  # connection and page cache warm-up
    p50 = _read_p50_ms(db, name, ids)
    with capsys.disabled():
        print(f"\nfind_one by _id in {BIG:,} documents: p50 {p50:.2f} ms")
    assert p50 < 20, f"p50 {p50:.1f} ms: reads by _id are scanning again"
    assert ensure_id_indexes(db, settings=ferret) == []  # idempotent


def test_index_is_built_as_documents_arrive_and_finds_awkward_ids(
    ferret: Settings, db: Database[dict[str, Any]]
) -> None:
    """Collections indexed when created (the batch layer's order), then written through FerretDB,
    find every _id, including ones whose JSON form has escapes; duplicates are still refused."""
    name = "bv_awkward_g2"
    db.drop_collection(name)
    ensure_id_indexes(db, create=[name], settings=ferret)
    awkward = [
        "2026-11-01|https://example.com/a?b=1&c=<2>",
        '2026-11-01|quote " and back\\slash',
        "2026-11-01|https://例え.jp/パス?q=é",
        "2026-11-01|tab\there\nnewline\u2028sep",
        "2026-11-01|#rank",
    ]
    db[name].insert_many([{"_id": i, "n": n} for n, i in enumerate(awkward)])
    for n, doc_id in enumerate(awkward):
        assert "SEARCH" in _plan(db, name, doc_id)
        found = db[name].find_one({"_id": doc_id})
        assert found == {"_id": doc_id, "n": n}
    assert db[name].find_one({"_id": "2026-11-01|absent"}) is None
    with pytest.raises(Exception, match=r"E11000|duplicate"):
        db[name].insert_one({"_id": awkward[0]})


def test_existing_collections_get_the_index_too(ferret: Settings, db: Database[dict[str, Any]]) -> None:
    """The registry collections, written before any batch view, are indexed by the next write."""
    db["registry"].replace_one({"_id": "served"}, {"_id": "served", "gen": 3}, upsert=True)
    path = sqlite_path(ferret, DB)
    ensure_id_indexes(db, create=["bv_other_g3"], settings=ferret)
    with sqlite3.connect(path) as conn:
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert index_name(_table(path, "registry")) in indexes
    assert index_name(_table(path, "bv_other_g3")) in indexes
    assert "SEARCH" in _plan(db, "registry", "served")


def test_ferretdb_keeps_working_after_a_restart(ferret: Settings, db: Database[dict[str, Any]]) -> None:
    name = "bv_restart_g4"
    db.drop_collection(name)
    ensure_id_indexes(db, create=[name], settings=ferret)
    db[name].insert_many([_document(i) for i in range(100)])
    control.down(ferret, ["ferretdb"])
    control.up(ferret, ["ferretdb"])
    assert db[name].find_one({"_id": _doc_id(7)})["pv"] == 1234  # type: ignore[index]
    db[name].insert_one(_document(100))
    assert db[name].count_documents({}) == 101
    assert "SEARCH" in _plan(db, name, _doc_id(100))
    db.drop_collection(name)  # the index goes with the table
    path = sqlite_path(ferret, DB)
    with sqlite3.connect(path) as conn:
        left = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'bv_restart%'")]
    assert left == []
