"""The end of realtime keys: which generations have them, and their teardown.

The speed layer writes them (stores.redis.sink); the batch job tears down those of generations it
retires; the rebuild tears down all of them.
"""

from __future__ import annotations

from collections.abc import Iterable

import redis

from stores.redis import keys


def realtime_generations(client: redis.Redis) -> set[int]:
    return {int(g) for g in client.smembers(keys.REALTIME_GENS)}


def drop_generations(client: redis.Redis, gens: Iterable[int]) -> int:
    """Delete every realtime key of these generations; returns how many keys went."""
    deleted = 0
    for gen in gens:
        deleted += unlink_matching(client, keys.realtime_pattern(gen))
        client.srem(keys.REALTIME_GENS, gen)
    return deleted


def unlink_matching(client: redis.Redis, pattern: str) -> int:
    """Delete every key matching ``pattern`` (SCAN, then UNLINK a thousand at a time); returns how
    many went."""
    deleted = 0
    batch: list[bytes] = []
    for key in client.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            deleted += int(client.unlink(*batch))
            batch.clear()
    if batch:
        deleted += int(client.unlink(*batch))
    return deleted
