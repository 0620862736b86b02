"""The country of a client address, from geoip2fast's own offline data file (IPv4 and IPv6).

The database (its ``geoip2fast-ipv6.dat.gz``, shipped in the package; a new release of the
package is a new database) is loaded once per worker, on first use or when the app starts
collecting, and a lookup is a binary search in memory. An address it does not place (private,
loopback, reserved, not in the file, not an address) has no country: the event carries none, and
the country dimension counts it as ``(unknown)``, the contract's value for a missing country.
"""

from __future__ import annotations

import re
import threading
from typing import Any

DATA_FILE = "geoip2fast-ipv6.dat.gz"
_COUNTRY = re.compile(r"^[A-Z]{2}$")


class CountryLookup:
    def __init__(self, data_file: str = DATA_FILE) -> None:
        self.data_file = data_file
        self._db: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Reads the data file (a fraction of a second) unless this worker already did."""
        if self._db is not None:
            return
        with self._lock:
            if self._db is None:
                from geoip2fast import GeoIP2Fast

                self._db = GeoIP2Fast(geoip2fast_data_file=self.data_file, verbose=False)

    def country(self, address: str) -> str | None:
        """Two upper-case letters, or None where the database has no country."""
        if not address:
            return None
        self.load()
        code = str(self._db.lookup(address).country_code or "")
        return code if _COUNTRY.match(code) else None
