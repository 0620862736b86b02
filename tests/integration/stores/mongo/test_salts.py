"""The daily salts on the real MongoDB-protocol server (FerretDB): two workers that create the same
day's salt at once agree on one, and only the days asked for are forgotten."""

from __future__ import annotations

import asyncio
import os
from datetime import date, timedelta
from typing import Any

from pymongo import AsyncMongoClient

from api.collect.visitors import VisitorIds
from config.settings import Settings
from stores.mongo.salts import MongoSaltStore

DAY = date(2026, 11, 20)


def test_two_workers_agree_on_a_day_s_salt_and_old_salts_are_deleted(stack: Settings, unique: str) -> None:
    async def run() -> None:
        clients: list[AsyncMongoClient[dict[str, Any]]] = [
            AsyncMongoClient(stack.mongo_url) for _ in range(2)
        ]
        db = f"t_salts_{unique}"
        try:
            a, b = (MongoSaltStore(c[db]) for c in clients)
            for offset in range(3):  # three days, each created by both workers at once
                day = DAY + timedelta(days=offset)
                got = await asyncio.gather(
                    a.get_or_create(day, os.urandom(32)), b.get_or_create(day, os.urandom(32))
                )
                assert got[0] == got[1] and len(got[0]) == 32
                assert await a.get_or_create(day, b"other") == got[0]
            assert await a.forget_before(DAY + timedelta(days=1)) == 1
            assert await b.days() == [DAY + timedelta(days=1), DAY + timedelta(days=2)]

            # Two workers' visitor ids: same salt from the store, so the same id; today's and
            # yesterday's salts are all that is left after a worker's first id of a new day.
            today = DAY + timedelta(days=5)
            ids = [VisitorIds(store, lambda: today) for store in (a, b)]
            one = await asyncio.gather(*(v.visitor_id("s.example", "198.51.100.1", "ua") for v in ids))
            assert one[0] == one[1]
            assert await a.days() == [today]
        finally:
            await clients[0].drop_database(db)
            for c in clients:
                await c.close()

    asyncio.run(run())
