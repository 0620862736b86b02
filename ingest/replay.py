"""Replay of files into the log: JSONL (one event per line) and CSV (a header row of field names).

Each record keeps its original bytes, so a rejected line lands in the DLQ exactly as it was in the
file. Blank lines are skipped; every other line is either produced or dead-lettered.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ingest.pipeline import RawRecord, Unreadable


def read_jsonl(path: Path) -> Iterator[RawRecord]:
    with path.open("rb") as f:
        for line in f:
            line = line.strip()
            if line:
                yield line


def read_csv(path: Path) -> Iterator[RawRecord]:
    """Rows as (original line, fields); empty cells are absent optional fields."""
    with path.open("rb") as f:
        header_line = f.readline()
        header = next(csv.reader([header_line.decode("utf-8-sig")]))
        header = [h.strip() for h in header]
        for raw in f:
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                continue
            try:
                cells = next(csv.reader([line.decode("utf-8")]))
            except (UnicodeDecodeError, csv.Error) as exc:
                yield Unreadable(line, f"event: unreadable CSV line ({exc})")
                continue
            if len(cells) != len(header):
                yield Unreadable(line, f"event: expected {len(header)} CSV columns, got {len(cells)}")
                continue
            row: dict[str, Any] = {k: v for k, v in zip(header, cells, strict=True) if v != ""}
            yield line, row


def read_file(path: Path) -> Iterator[RawRecord]:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return read_jsonl(path)
    if suffix == ".csv":
        return read_csv(path)
    raise ValueError(f"{path}: unsupported file type {suffix!r} (use .jsonl or .csv)")


def count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for line in f if line.strip()) - (1 if path.suffix.lower() == ".csv" else 0)
