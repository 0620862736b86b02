"""The filter table's realtime rows on Redis (views.filter_table): the speed layer's sink and the
decoding of what the reader fetches.

Layout: per (generation, UTC day, site) one list (stores.redis.keys.filter_rows_key), of which each
element is one micro-batch's rows there, as one Arrow IPC stream of the table's schema
(views.filter_table.arrow_schema, ``day`` included), its buffers compressed (:data:`COMPRESSION`).
Rows are appended, never rewritten: a visitor seen in two micro-batches has a row in each, and a
query sums page views and unions visitor hashes over all of them, as it does with the batch part's.
Beside the lists, per (generation, site) a hash of their sizes (stores.redis.keys.filter_sizes_key):
per day the rows of its list and the bytes reading them holds (:func:`read_bytes`), incremented with
each RPUSH, so a reader can refuse a read too big before making it (stores.redis.reader).

The sink follows the add/prepare/flush shape of stores.redis.sink: :meth:`FilterRowsSink.add` takes
rows of one micro-batch, :meth:`FilterRowsSink.prepare` encodes them (outside the transaction: it
reads nothing from Redis) and :meth:`FilterRowsSink.flush` queues the RPUSHes and the HINCRBYs of
the sizes into the pipeline of the micro-batch's commit transaction, so the rows and their counts
land with the batch id and end offsets or not at all: the counts are exactly the lists' through a
crash; a replayed micro-batch is skipped before its rows are even computed (speed_layer.commit), so
it counts nothing twice. The lists and the hashes go with their generation (stores.redis.teardown),
like its other keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import redis

from stores.redis import keys
from views import filter_table

if TYPE_CHECKING:
    import pyarrow as pa

COMPRESSION = "zstd"
"""The IPC buffers' codec (docs/filters-speed.md has the sizes that chose it)."""
SMALL_ROWS = 64
"""A stream of at most this many rows is stored compressed only if that makes it smaller (the
codec's frame per buffer costs more than it saves on a few rows)."""
GEN = "gen"
"""The generation column of the rows :meth:`FilterRowsSink.add_table` takes."""


class FilterRowsSink:
    """Accumulates one micro-batch's filter rows; flushed inside the commit transaction."""

    def __init__(self, compression: str | None = COMPRESSION) -> None:
        self.compression = compression
        self._tables: list[pa.Table] = []
        self._blobs: dict[str, bytes] = {}
        self._sizes: dict[str, tuple[str, str, int, int]] = {}
        """List key -> (its sizes hash's key, its day, the stream's rows, its bytes to read)."""
        self._gens: set[int] = set()
        self.rows = 0

    def add(self, gen: int, rows: Sequence[Mapping[str, Any]]) -> None:
        """Rows of generation ``gen`` as mappings of the table's columns (``day`` a date)."""
        import pyarrow as pa

        if rows:
            table = pa.Table.from_pylist(list(rows), schema=filter_table.arrow_schema())
            self.add_table(table.add_column(0, GEN, pa.array([gen] * len(rows), pa.int32())))

    def add_table(self, table: pa.Table) -> None:
        """Rows of any generations: the table's columns and :data:`GEN` (the micro-batch's Arrow
        collection, speed_layer.filter_rows)."""
        if table.num_rows:
            self._tables.append(table)

    def prepare(self) -> None:
        """Encode the rows: one IPC stream per (generation, site, day), rows in the table's order
        (site, page, hour: views.filter_table.SORT) within it."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        if not self._tables:
            return
        schema = filter_table.arrow_schema()
        with_gen = schema.insert(0, pa.field(GEN, pa.int32()))
        table = pa.concat_tables([t.select(with_gen.names).cast(with_gen) for t in self._tables])
        self._tables = []
        order = [GEN, filter_table.SITE, filter_table.DAY, *filter_table.SORT[1:]]
        table = table.sort_by([(c, "ascending") for c in order])
        gens = table.column(GEN).to_numpy()
        sites = pc.dictionary_encode(table.column(filter_table.SITE)).combine_chunks().indices.to_numpy()
        days = table.column(filter_table.DAY).cast(pa.int32()).to_numpy()
        changed = (gens[1:] != gens[:-1]) | (sites[1:] != sites[:-1]) | (days[1:] != days[:-1])
        starts = [0, *(np.flatnonzero(changed) + 1).tolist()]
        ends = [*starts[1:], table.num_rows]
        rows = table.drop_columns([GEN])
        compressed = pa.ipc.IpcWriteOptions(compression=self.compression)
        plain = pa.ipc.IpcWriteOptions()
        for start, end in zip(starts, ends, strict=True):
            part = rows.slice(start, end - start)
            gen = int(gens[start])
            site = part.column(filter_table.SITE)[0].as_py()
            day = part.column(filter_table.DAY)[0].as_py().isoformat()
            blob = encode(part, compressed)
            if self.compression is not None and part.num_rows <= SMALL_ROWS:
                blob = min(blob, encode(part, plain), key=len)
            key = keys.filter_rows_key(gen, site, day)
            self._blobs[key] = blob
            self._sizes[key] = (keys.filter_sizes_key(gen, site), day, part.num_rows, read_bytes(blob, part))
            self._gens.add(gen)
        self.rows += table.num_rows

    def flush(self, pipe: redis.client.Pipeline) -> int:
        """Queue the RPUSHes and the counts of what they append into ``pipe`` (in MULTI); returns
        the number of lists appended to."""
        for key, blob in self._blobs.items():
            pipe.rpush(key, blob)
            sizes, day, rows, nbytes = self._sizes[key]
            pipe.hincrby(sizes, keys.filter_rows_field(day), rows)
            pipe.hincrby(sizes, keys.filter_bytes_field(day), nbytes)
        if self._gens:
            pipe.sadd(keys.REALTIME_GENS, *sorted(self._gens))
        return len(self._blobs)

    @property
    def blobs(self) -> dict[str, bytes]:
        """The encoded lists' elements by key (after :meth:`prepare`)."""
        return dict(self._blobs)

    @property
    def sizes(self) -> dict[str, tuple[int, int]]:
        """The rows and bytes (:func:`read_bytes`) each element adds to its list's counts, by the
        list's key (after :meth:`prepare`)."""
        return {key: (rows, nbytes) for key, (_, _, rows, nbytes) in self._sizes.items()}


def read_bytes(blob: bytes, rows: pa.Table) -> int:
    """What reading one stream holds in the reader's memory, counted in the sizes hash: the stream
    as fetched plus its rows decoded (their Arrow buffers: ``rows``' own size, which the decoded
    table's matches within a few percent)."""
    return len(blob) + int(rows.nbytes)


def encode(rows: pa.Table, options: Any = None) -> bytes:
    """``rows`` (the table's schema) as one Arrow IPC stream."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema, options=options) as writer:
        writer.write_table(rows, max_chunksize=max(rows.num_rows, 1))
    return bytes(sink.getvalue().to_pybytes())


def decode_blobs(blobs: Iterable[bytes]) -> pa.Table:
    """The rows of these lists' elements, concatenated, with the schema
    views.filter_table.arrow_schema (an empty table of it when there are none)."""
    import pyarrow as pa

    schema = filter_table.arrow_schema()
    tables = [pa.ipc.open_stream(pa.py_buffer(blob)).read_all() for blob in blobs]
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables).cast(schema)
