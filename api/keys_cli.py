"""``python -m api keys add|list|revoke``: the API keys, in the platform's MongoDB database.

    python -m api keys add --name dashboard --scope read --site shop.example.com
    python -m api keys add --name collector --scope write
    python -m api keys add --name ops --scope admin --scope read
    python -m api keys list
    python -m api keys revoke 3f9c2a1b

``add`` prints the key once (only its digest is stored); a running API accepts it at once and
refuses a revoked key within LAMBDA_API_KEY_CACHE_S.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from api.credentials import new_key
from api.keys import normalize_site
from config.settings import Settings, get_settings
from contract import utc
from stores.api_keys import SCOPES
from stores.mongo.api_keys import MongoApiKeyStore
from stores.mongo.client import connect_async


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m api keys", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add", help="create a key and print it (once)")
    add.add_argument("--name", required=True, help="who or what uses it")
    add.add_argument("--scope", action="append", choices=SCOPES, required=True, help="repeat for several")
    add.add_argument("--site", action="append", help="a site the key may read (repeat; default: every site)")
    sub.add_parser("list", help="every key: id, name, scopes, sites, created, revoked")
    revoke = sub.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument("key_id")
    return parser


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    client = connect_async(settings)
    store = MongoApiKeyStore(client[settings.mongo_db])
    try:
        if args.action == "add":
            try:
                sites = None if not args.site else tuple(sorted({normalize_site(s) for s in args.site}))
            except ValueError as exc:
                print(f"--site: {exc}", file=sys.stderr)
                return 2
            key, record = new_key(args.name, set(args.scope), sites)
            await store.insert(record)
            print(key)
            scopes = ",".join(sorted(record.scopes))
            print(
                f"key {record.key_id} ({args.name}): scopes {scopes}; sites {', '.join(sites or ['all'])}. "
                "Shown once: only its digest is stored.",
                file=sys.stderr,
            )
        elif args.action == "list":
            print(f"{'id':8}  {'name':20}  {'scopes':17}  {'sites':30}  {'created':20}  revoked")
            for r in await store.all():
                print(
                    f"{r.key_id:8}  {r.name[:20]:20}  {','.join(sorted(r.scopes)):17}  "
                    f"{','.join(r.sites or ['(all)'])[:30]:30}  {r.created_at:%Y-%m-%dT%H:%M:%SZ}  "
                    f"{'' if r.revoked_at is None else f'{r.revoked_at:%Y-%m-%dT%H:%M:%SZ}'}"
                )
        elif not await store.revoke(args.key_id, utc.now()):
            print(f"no active key {args.key_id!r}", file=sys.stderr)
            return 1
        else:
            print(f"revoked {args.key_id}", file=sys.stderr)
        return 0
    finally:
        await client.close()


def main(argv: list[str], settings: Settings | None = None) -> int:
    return asyncio.run(_run(settings or get_settings(), _parser().parse_args(argv)))
