"""The Redis layout: keys of the generation protocol's hot copy and of the realtime views, and
their encodings. Everything that names a Redis key or field goes through here."""

from __future__ import annotations

import json
from collections.abc import Iterable

from generations.model import Offsets as Offsets
from generations.model import Served as Served
from generations.model import SpeedCommit as SpeedCommit

# The fields of a realtime hash: their layout is shared with the in-memory twin (stores.realtime_hash).
from stores.realtime_hash import PV as PV
from stores.realtime_hash import SKETCH as SKETCH
from stores.realtime_hash import hour_field as hour_field
from stores.rows import VISIT_FIELDS as VISIT_FIELDS

ACTIVE = "lambda:gen:active"
"""JSON {gen: {partition: cut offset}}: the generations the speed layer counts for."""
SERVED = "lambda:gen:served"
"""JSON {"gen": g, "cut": {...}}: the served generation (hot copy of MongoDB's pointer)."""
SPEED_COMMIT = "lambda:speed:commit"
"""JSON {"batch_id": n, "offsets": {partition: end offset}}: the speed layer's last commit."""


def encode_active(active: dict[int, Offsets]) -> str:
    return json.dumps({str(g): {str(p): o for p, o in cut.items()} for g, cut in sorted(active.items())})


def decode_active(raw: bytes | str | None) -> dict[int, Offsets]:
    if not raw:
        return {}
    return {int(g): {int(p): int(o) for p, o in cut.items()} for g, cut in json.loads(raw).items()}


def encode_served(served: Served) -> str:
    """JSON, of which the reader's Redis function (stores/redis/snapshot.lua) reads ``gen``."""
    return json.dumps({"gen": served.gen, "cut": {str(p): o for p, o in served.cut.items()}})


def decode_served(raw: bytes | str | None) -> Served:
    if not raw:
        return Served()
    data = json.loads(raw)
    return Served(int(data["gen"]), {int(p): int(o) for p, o in data["cut"].items()})


def encode_commit(commit: SpeedCommit) -> str:
    return json.dumps(
        {"batch_id": commit.batch_id, "offsets": {str(p): o for p, o in commit.offsets.items()}}
    )


def decode_commit(raw: bytes | str | None) -> SpeedCommit:
    if not raw:
        return SpeedCommit()
    data = json.loads(raw)
    return SpeedCommit(int(data["batch_id"]), {int(p): int(o) for p, o in data["offsets"].items()})


# --- realtime views ------------------------------------------------------------------------------
# One hash per (generation, view, key, UTC day), the realtime twin of a batch-view document:
#   pv      page views in the day            (HINCRBY)
#   pv:HH   page views in hour HH, 00-23     (HINCRBY)
#   sk      HLL sketch of the day's visitors (DataSketches bytes, read-union-write)
#   sk:HH   HLL sketch of hour HH's visitors
#   vi bo du vv, vi:HH ...   visits, bounces, duration (ms), views in visits  (HINCRBY, may be < 0)
# Exact distinct counts are not kept in realtime: they do not add up across micro-batches.
# Beside them, one sorted set per (generation, view, day) ranks the keys by the day's page views,
# so "top N" never scans hashes.
SPEED_STATS = "lambda:speed:stats"
"""JSON of the last micro-batch: batch id, time, rows, seconds, lag per partition, invalid total."""
REALTIME_PREFIX = "lambda:rt:"
REALTIME_GENS = "lambda:rt:gens"
"""Set of the generation numbers that have realtime keys (teardown without scanning everything)."""


def generation_prefix(gen: int) -> str:
    """What every realtime key of generation ``gen`` starts with; the rest is its suffix (the
    reader's Redis function derives the generation's keys from the served pointer this way)."""
    return f"{REALTIME_PREFIX}{gen}:"


def hash_suffix(view: str, key: str, day: str) -> str:
    return f"{view}:{day}|{key}"


def rank_suffix(view: str, day: str) -> str:
    return f"{view}:{day}#rank"


def realtime_key(gen: int, view: str, key: str, day: str) -> str:
    return generation_prefix(gen) + hash_suffix(view, key, day)


def realtime_rank_key(gen: int, view: str, day: str) -> str:
    return generation_prefix(gen) + rank_suffix(view, day)


def realtime_pattern(gen: int) -> str:
    """Every realtime key of one generation (SCAN MATCH pattern)."""
    return generation_prefix(gen) + "*"


# The filter table's realtime rows (views.filter_table, stores.redis.filter_rows): per (generation,
# UTC day, site) a list of Arrow IPC streams, one per micro-batch that had rows there (RPUSH in the
# micro-batch's commit). The day comes first so that a key reads like a realtime hash's suffix.
FILTERS_SUFFIX = "filters:"


def filter_suffix(site: str, day: str) -> str:
    """The rest of a filter-rows list's key after its generation's prefix."""
    return f"{FILTERS_SUFFIX}{day}|{site}"


def filter_rows_key(gen: int, site: str, day: str) -> str:
    return generation_prefix(gen) + filter_suffix(site, day)


# Beside a site's lists, per (generation, site) one hash of their sizes, counted by the commits that
# append to them (HINCRBY in the same MULTI as each RPUSH), so a reader knows what a read of the lists
# would return before it reads them:
#   rows:<YYYY-MM-DD>    rows in the day's list
#   bytes:<YYYY-MM-DD>   what reading them holds: the streams' bytes plus their rows' decoded Arrow size
FILTER_SIZES_SUFFIX = "filters#sizes|"


def filter_sizes_suffix(site: str) -> str:
    """The rest of a site's hash of list sizes' key after its generation's prefix."""
    return f"{FILTER_SIZES_SUFFIX}{site}"


def filter_sizes_key(gen: int, site: str) -> str:
    return generation_prefix(gen) + filter_sizes_suffix(site)


def filter_rows_field(day: str) -> str:
    """The field of the sizes hash counting the rows of ``day``'s list."""
    return f"rows:{day}"


def filter_bytes_field(day: str) -> str:
    """The field of the sizes hash counting the bytes of ``day``'s list (streams plus decoded)."""
    return f"bytes:{day}"


# Per generation, the set of views the speed layer has counted it with since its first micro-batch,
# each as "name@fingerprint" (plus a sentinel, so an emptied set still says "recorded"). A view is
# served for a generation only when this set names it with the fingerprint of the generation's
# batch views: then its realtime part counted every event from the cut, with the same code.
VIEWS_SENTINEL = "#"
VIEWS_SUFFIX = "#views"


def realtime_views_key(gen: int) -> str:
    return generation_prefix(gen) + VIEWS_SUFFIX


def decode_views(raw: Iterable[bytes | str] | None) -> frozenset[str] | None:
    """The members of a generation's set of counted views (``SMEMBERS``), sentinel left out: None
    when the set does not exist (the generation has not been counted yet)."""
    members = frozenset(m.decode() if isinstance(m, bytes) else str(m) for m in raw or ())
    return (members - {VIEWS_SENTINEL}) if members else None
