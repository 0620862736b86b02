"""stores.redis.filter_rows' sink with plain rows: one Arrow IPC stream per (generation, site, day)
of a micro-batch, in the table's order, that decodes to the rows it was given; and the speed
layer's split of the collected Arrow table (speed_layer.filter_rows)."""

from __future__ import annotations

import datetime
import random
from typing import Any

import pyarrow as pa
import pytest

from speed_layer import filter_rows as speed_filter_rows
from speed_layer import outputs
from stores.redis import keys
from stores.redis.filter_rows import GEN, SMALL_ROWS, FilterRowsSink, decode_blobs, encode
from views import filter_table

DAY1, DAY2 = datetime.date(2026, 11, 20), datetime.date(2026, 11, 21)


def row(site: str, day: datetime.date, hour: int, page: str, visitor: int, pv: int = 1) -> dict[str, Any]:
    values = {name: f"{name}-{visitor % 3}" for name in filter_table.DIMENSIONS}
    values["page"] = page
    pages = dict.fromkeys(filter_table.VISIT_PAGES)
    return {
        "site": site,
        "day": day,
        "hour": hour,
        **values,
        **pages,
        "visitor": visitor,
        "pageviews": pv,
        **dict.fromkeys(filter_table.VISIT_COLUMNS),
    }


def traffic(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        row(
            rng.choice(["a.example", "b.example:8080"]),
            rng.choice([DAY1, DAY2]),
            rng.randrange(24),
            f"https://a.example/p{rng.randrange(40)}?q=a|b",
            rng.getrandbits(63) - 2**62,
            1 + rng.randrange(3),
        )
        for _ in range(n)
    ]


def ordered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: tuple(str(r[c]) for c in filter_table.COLUMNS))


@pytest.mark.parametrize("compression", [None, "lz4", "zstd"])
def test_one_stream_per_generation_site_and_day_decodes_to_its_rows(compression: str | None) -> None:
    rows0, rows1 = traffic(2_000), traffic(50, seed=8)
    sink = FilterRowsSink(compression)
    sink.add(0, rows0)
    sink.add(1, rows1)
    sink.add(1, [])
    sink.prepare()
    blobs = sink.blobs
    expected: dict[str, list[dict[str, Any]]] = {}
    for gen, rows in ((0, rows0), (1, rows1)):
        for r in rows:
            expected.setdefault(keys.filter_rows_key(gen, r["site"], r["day"].isoformat()), []).append(r)
    assert set(blobs) == set(expected) == set(sink.sizes)
    for key, blob in blobs.items():
        table = decode_blobs([blob])
        assert table.schema == filter_table.arrow_schema()
        # The counts the flush adds: the stream's rows, and its bytes plus its rows' Arrow size.
        n, nbytes = sink.sizes[key]
        assert n == table.num_rows
        assert len(blob) + 0.95 * table.nbytes <= nbytes <= len(blob) + 1.25 * table.nbytes
        got = table.to_pylist()
        assert ordered(got) == ordered(expected[key])
        # In the table's order within a stream: site, page, hour.
        assert [(r["page"], r["hour"]) for r in got] == sorted((r["page"], r["hour"]) for r in got)
    assert sink.rows == len(rows0) + len(rows1)


def test_the_keys_name_generation_day_and_site() -> None:
    key = keys.filter_rows_key(3, "b.example:8080", "2026-11-21")
    assert key == "lambda:rt:3:filters:2026-11-21|b.example:8080"
    assert keys.filter_rows_key(3, "a.example", "2026-11-21").startswith(keys.generation_prefix(3))


def test_a_small_stream_is_compressed_only_if_that_pays() -> None:
    few = traffic(1)
    sink = FilterRowsSink("zstd")
    sink.add(0, few)
    sink.prepare()
    (blob,) = sink.blobs.values()
    table = pa.Table.from_pylist(few, schema=filter_table.arrow_schema())
    assert len(blob) == min(
        len(encode(table)), len(encode(table, pa.ipc.IpcWriteOptions(compression="zstd")))
    )
    many = traffic(4 * SMALL_ROWS, seed=9)
    sink = FilterRowsSink("zstd")
    some = [r for r in many if r["site"] == "a.example" and r["day"] == DAY1]
    sink.add(0, some)
    sink.prepare()
    (blob,) = sink.blobs.values()
    assert decode_blobs([blob]).num_rows == len(some)


def test_decoding_concatenates_and_nothing_is_an_empty_table() -> None:
    empty = decode_blobs([])
    assert empty.num_rows == 0 and empty.schema == filter_table.arrow_schema()
    a, b = traffic(10, seed=1), traffic(10, seed=2)
    blobs = [encode(pa.Table.from_pylist(rows, schema=filter_table.arrow_schema())) for rows in (a, b)]
    assert decode_blobs(blobs).to_pylist() == a + b


def test_nothing_added_writes_nothing() -> None:
    sink = FilterRowsSink()
    sink.prepare()
    assert sink.blobs == {} and sink.rows == 0


def test_the_speed_layer_splits_its_filter_rows_out_of_the_collected_table() -> None:
    rows = traffic(5)
    filters = pa.Table.from_pylist(rows, schema=filter_table.arrow_schema())
    prefixed = filters.rename_columns([speed_filter_rows.PREFIX + c for c in filters.column_names])
    prefixed = prefixed.add_column(0, GEN, pa.array([2] * len(rows), pa.int32()))
    prefixed = prefixed.add_column(0, "view", pa.array([speed_filter_rows.VIEW] * len(rows)))
    views = pa.table(
        {"view": ["page", None], GEN: pa.array([2, 2], pa.int32()), "key": ["/", "x"], "day": ["d", "d"]}
    )
    collected = pa.concat_tables([views, prefixed], promote_options="default")
    table, others = speed_filter_rows.split_table(collected)
    assert table is not None
    assert table.column_names == [GEN, *filter_table.COLUMNS]
    assert table.drop_columns([GEN]).cast(filter_table.arrow_schema()).to_pylist() == rows
    assert others.to_pylist() == views.to_pylist()
    # Without filter rows' columns (the table off) the collected table is left as it is.
    assert speed_filter_rows.split_table(views) == (None, views)

    sink = FilterRowsSink()
    sink.add_table(table)
    sink.prepare()
    assert sum(decode_blobs([b]).num_rows for b in sink.blobs.values()) == len(rows)
    assert all(k.startswith(keys.generation_prefix(2)) for k in sink.blobs)

    # What the micro-batch's job gives: the filter rows as a field of their own, the rest by kind.
    split = outputs.split(others.to_pylist(), table)
    assert split.filters is table and split.views == views.to_pylist()
    assert split.visit_flags == [] and split.minutes == []
