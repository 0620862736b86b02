"""Who is calling: the key a request presents, checked against the key store, as a :class:`Caller`.

A key travels in a header, ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``, never in a URL.
With ``LAMBDA_API_AUTH=keys`` every /v1 route and /metrics need a key with the route's scope; with
``open`` (loopback only, see :func:`check_binding`) a request without a key may do everything and a
request with one is held to it. The legacy ingest key (``LAMBDA_API_KEY``) is a ``write`` key; set
in open mode, POST /v1/events needs it, as before keys had scopes.

A worker remembers a key it looked up for ``LAMBDA_API_KEY_CACHE_S`` (a revoked key is refused
within that), in a cache bounded in bytes.
"""

from __future__ import annotations

import ipaddress
import secrets
from dataclasses import dataclass

from cachetools import TTLCache
from fastapi import HTTPException

from api.credentials import digest, key_id_of
from config.memo import deep_size
from config.settings import Settings
from stores.api_keys import ADMIN, READ, SCOPES, WRITE, ApiKeyStore

KEY_CACHE_BYTES = 1 << 20
"""Bound of the looked-up keys a worker remembers (about 2,000 keys)."""


@dataclass(frozen=True)
class Caller:
    key_id: str | None
    """None: no key (open mode)."""
    scopes: frozenset[str]
    sites: frozenset[str] | None = None
    """The only sites it may read (None: every site)."""

    @property
    def rate_key(self) -> str | None:
        """What the rate limit counts against: the key (None: not limited)."""
        return self.key_id


LEGACY_KEY_ID = "legacy-ingest-key"


class Unauthorized(HTTPException):
    def __init__(self, detail: str) -> None:
        super().__init__(401, detail, headers={"WWW-Authenticate": 'Bearer realm="lambda"'})


class Forbidden(HTTPException):
    def __init__(self, detail: str) -> None:
        super().__init__(403, detail)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OpenOnNonLoopback(SystemExit):
    pass


def check_binding(settings: Settings, host: str) -> None:
    """Refuses (exits) to serve without keys on an address other machines can reach."""
    if settings.api_auth == "open" and not is_loopback(host):
        raise OpenOnNonLoopback(
            f"refusing to serve without API keys on {host}: open mode (LAMBDA_API_AUTH=open) is for "
            "a loopback address only. Set LAMBDA_API_AUTH=keys and create keys with "
            "`python -m api keys add`, or bind 127.0.0.1."
        )


def mode_note(settings: Settings) -> str:
    if settings.api_auth == "keys":
        return "API keys required (LAMBDA_API_AUTH=keys)"
    return f"open: no API key needed, loopback only ({settings.api_host}; LAMBDA_API_AUTH=open)"


class Authenticator:
    def __init__(self, settings: Settings, store: ApiKeyStore) -> None:
        self.open = settings.api_auth == "open"
        self.store = store
        self.legacy = None if settings.api_key is None else settings.api_key.get_secret_value()
        anonymous_scopes = {READ, ADMIN} if self.legacy else set(SCOPES)
        self.anonymous = Caller(None, frozenset(anonymous_scopes))
        self._known: TTLCache[str, Caller | None] = TTLCache(
            KEY_CACHE_BYTES, ttl=settings.api_key_cache_s, getsizeof=_cached_size
        )

    async def caller(self, presented: str | None) -> Caller:
        """The caller of a request presenting ``presented`` (None: no key); 401 if the key is
        required and missing, unknown or revoked."""
        if presented is None:
            if self.open:
                return self.anonymous
            raise Unauthorized("an API key is required: Authorization: Bearer <key> or X-API-Key")
        if self.legacy is not None and secrets.compare_digest(presented.encode(), self.legacy.encode()):
            return Caller(LEGACY_KEY_ID, frozenset({WRITE}))
        hashed = digest(presented)
        try:
            known = self._known[hashed]
        except KeyError:
            known = await self._look_up(presented, hashed)
            self._known[hashed] = known
        if known is None:
            raise Unauthorized("the API key is unknown or revoked")
        return known

    async def _look_up(self, presented: str, hashed: str) -> Caller | None:
        key_id = key_id_of(presented)
        if key_id is None:
            return None
        record = await self.store.get(key_id)
        if record is None or not record.active or not secrets.compare_digest(record.digest, hashed):
            return None
        sites = None if record.sites is None else frozenset(record.sites)
        return Caller(record.key_id, record.scopes, sites)


def _cached_size(caller: Caller | None) -> int:
    return 64 + 100 + deep_size(caller)  # + the digest (key) and the TTL cache's links


def require_scope(caller: Caller, scope: str) -> None:
    """403 unless ``caller`` has ``scope``; 401 for a request without a key (it needs one)."""
    if scope in caller.scopes:
        return
    if caller.key_id is None:
        raise Unauthorized(f"an API key with the {scope!r} scope is required")
    if scope not in caller.scopes:
        raise Forbidden(
            f"this API key lacks the {scope!r} scope (it has: {', '.join(sorted(caller.scopes))})"
        )


def require_site(caller: Caller, site: str) -> None:
    """403 unless ``caller`` may read ``site``."""
    if caller.sites is not None and site not in caller.sites:
        raise Forbidden(
            f"this API key may read the sites {', '.join(sorted(caller.sites))} only, not {site!r}"
        )
