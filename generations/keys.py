"""Redis keys of the generation protocol and their encodings, shared by all three layers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

ACTIVE = "lambda:gen:active"
"""JSON {gen: {partition: cut offset}}: the generations the speed layer counts for."""
SERVED = "lambda:gen:served"
"""JSON {"gen": g, "cut": {...}}: the served generation (hot copy of MongoDB's pointer)."""
SPEED_COMMIT = "lambda:speed:commit"
"""JSON {"batch_id": n, "offsets": {partition: end offset}}: the speed layer's last commit."""


@dataclass(frozen=True)
class SpeedCommit:
    batch_id: int = -1
    offsets: dict[int, int] = field(default_factory=dict)


def encode_active(active: dict[int, dict[int, int]]) -> str:
    return json.dumps({str(g): {str(p): o for p, o in cut.items()} for g, cut in sorted(active.items())})


def decode_active(raw: bytes | str | None) -> dict[int, dict[int, int]]:
    if not raw:
        return {}
    return {int(g): {int(p): int(o) for p, o in cut.items()} for g, cut in json.loads(raw).items()}


def encode_commit(commit: SpeedCommit) -> str:
    return json.dumps(
        {"batch_id": commit.batch_id, "offsets": {str(p): o for p, o in commit.offsets.items()}}
    )


def decode_commit(raw: bytes | str | None) -> SpeedCommit:
    if not raw:
        return SpeedCommit()
    data = json.loads(raw)
    return SpeedCommit(int(data["batch_id"]), {int(p): int(o) for p, o in data["offsets"].items()})
