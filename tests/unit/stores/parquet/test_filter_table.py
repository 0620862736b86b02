"""The filter table's layout, the files a reader lists and garbage collection, on a tmp directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from stores.parquet.filter_table import (
    ParquetFilterTableWriter,
    batch_files,
    day_dir,
    drop_generation,
    garbage_collect,
    generation_dir,
    generations,
    local_root,
)


def make(root: Path, gen: int, day: str, parts: int = 1) -> list[str]:
    directory = root / f"gen={gen}" / f"day={day}"
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(parts):
        path = directory / f"part-{i:05d}-abc.snappy.parquet"
        path.write_bytes(b"PAR1")
        files.append(str(path))
    (directory / ".part-00000-abc.snappy.parquet.crc").write_bytes(b"")
    return files


def test_the_root_is_a_path_or_a_file_uri(tmp_path: Path) -> None:
    assert local_root(tmp_path.as_uri()) == tmp_path
    assert local_root(str(tmp_path)) == tmp_path
    assert local_root((tmp_path / "with space").as_uri()) == tmp_path / "with space"
    assert generation_dir(tmp_path.as_uri(), 3) == tmp_path / "gen=3"
    assert day_dir(tmp_path.as_uri(), 3, "2026-11-20") == tmp_path / "gen=3" / "day=2026-11-20"
    for uri in ("s3a://bucket/filters", "hdfs://namenode:8020/filters"):
        with pytest.raises(ValueError, match="filesystem"):
            local_root(uri)
        with pytest.raises(ValueError):
            ParquetFilterTableWriter(uri)


def test_batch_files_take_each_day_from_the_generation_holding_it(tmp_path: Path) -> None:
    root = tmp_path.as_uri()
    old = make(tmp_path, 1, "2026-11-19", parts=2)
    make(tmp_path, 1, "2026-11-20")  # recomputed by generation 2: not read
    new = make(tmp_path, 2, "2026-11-20", parts=3)
    (tmp_path / "gen=2" / "_SUCCESS").write_bytes(b"")
    days = {"2026-11-20": 2, "2026-11-19": 1, "2026-11-21": 2}  # the 21st had no events: no directory
    assert batch_files(root, days) == sorted(old) + sorted(new)
    assert batch_files(str(tmp_path), days) == sorted(old) + sorted(new)
    assert all(not f.startswith("file:") for f in batch_files(root, days))
    assert batch_files(root, {}) == []
    assert batch_files((tmp_path / "absent").as_uri(), days) == []


def test_garbage_collection_keeps_referenced_and_protected_generations(tmp_path: Path) -> None:
    root = tmp_path.as_uri()
    for gen in (1, 2, 3, 4, 5):
        make(tmp_path, gen, "2026-11-20")
    (tmp_path / "not-a-generation").mkdir()
    assert generations(root) == [1, 2, 3, 4, 5]
    # Generation 4's day map names 2's directory for one day (an incremental run reused it) and a
    # view's collection of 3: only the filter table's entries keep a directory.
    referenced = {("filters", 4), ("filters", 2), ("page", 3), ("page", 4)}
    dropped = garbage_collect(root, referenced, protected_gens={5})
    assert dropped == [str(tmp_path / "gen=1"), str(tmp_path / "gen=3")]
    assert generations(root) == [2, 4, 5]
    assert (tmp_path / "not-a-generation").is_dir()
    assert garbage_collect(root, referenced, {5}) == []
    assert garbage_collect((tmp_path / "absent").as_uri(), set(), set()) == []


def test_a_failed_generation_is_dropped_whole(tmp_path: Path) -> None:
    root = tmp_path.as_uri()
    make(tmp_path, 7, "2026-11-20")
    (tmp_path / "gen=7" / "_temporary" / "0").mkdir(parents=True)  # a write that never committed
    writer = ParquetFilterTableWriter(root)
    writer.drop_generation(7)
    assert not (tmp_path / "gen=7").exists()
    assert drop_generation(root, 7) is False
    writer.drop_generation(8)  # nothing written: nothing to do
