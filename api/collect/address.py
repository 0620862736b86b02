"""The client address of a collected page view: the peer's, or ``X-Forwarded-For``'s behind a
proxy the settings list (``LAMBDA_COLLECT_TRUSTED_PROXIES``).

Any client can write ``X-Forwarded-For``, so the header counts only when the peer is a listed
proxy; then the client is the rightmost address of the chain that is not itself a listed proxy
(each proxy appends the address it received from, so the entries left of it are the client's
claim). The address is used for the visitor id and the country only and never stored or logged.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(entries: Iterable[str]) -> tuple[Network, ...]:
    """Parsed ``LAMBDA_COLLECT_TRUSTED_PROXIES`` entries (an address is a one-address network)."""
    return tuple(ipaddress.ip_network(e.strip(), strict=False) for e in entries)


def _trusted(address: str, proxies: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in proxies)


def client_address(peer: str | None, forwarded_for: str | None, proxies: tuple[Network, ...]) -> str:
    """The client's address; ``""`` when the connection has none (a test transport, a socket)."""
    address = peer or ""
    if not forwarded_for or not proxies or not _trusted(address, proxies):
        return address
    for hop in reversed([h.strip() for h in forwarded_for.split(",")]):
        if not hop:
            continue
        if not _trusted(hop, proxies):
            return hop
        address = hop
    return address
