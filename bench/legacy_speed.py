"""The speed layer with the parse it had before the layers applied the whole contract.

``python -m bench.legacy_speed run`` is ``python -m speed_layer run`` with
``speed_layer.stream.parse_kafka_records`` replaced by :func:`bench.contract.legacy_parse`
(``from_json`` and shape checks only): everything else, the dedup, the views, the commit, is the
layer's own code. ``bench/contract.py --layers`` times both on the same backlog, so the difference
is what the whole contract costs the layer's throughput.
"""

from __future__ import annotations

import sys
from typing import Any

import speed_layer.stream
from bench.contract import legacy_parse
from speed_layer.__main__ import main


def _legacy(records: Any, bounds: Any = None, **_: Any) -> Any:
    return legacy_parse(records)


if __name__ == "__main__":
    setattr(speed_layer.stream, "parse_kafka_records", _legacy)  # noqa: B010 (replaced for this process)
    sys.exit(main())
