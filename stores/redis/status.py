"""What the operator's status reads from Redis besides the engine's snapshot
(stores.redis.reader): the served pointer as the hot copy has it, and the memory Redis uses."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from stores.redis import keys


async def served_gen(client: Redis) -> int:
    """The served generation of the hot copy (-1: none)."""
    return keys.decode_served(await client.get(keys.SERVED)).gen


async def memory(client: Redis) -> dict[str, Any]:
    """Redis' used memory against its maxmemory (None there: no limit)."""
    info = await client.info("memory")
    used, limit = int(info["used_memory"]), int(info.get("maxmemory", 0)) or None
    return {
        "used_memory_bytes": used,
        "maxmemory_bytes": limit,
        "used_share": None if limit is None else round(used / limit, 4),
    }
