"""The speed bench's step table: each step once, and "other" what the steps leave of a micro-batch
(it came out negative when the log counted the read and the visits inside the views' step too)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.speed import STEPS, steps

FILTERS = "filter rows 0.50 s"
FLOOR_PHASES = {"read": 6.0, "visits": 5.0, "views": 13.0}


def _line(batch: int, seconds: float, phases: str) -> str:
    return (
        f"2026-11-26 21:50:38,407 INFO speed_layer.job batch {batch}: 500000 rows (0 invalid, 5000 "
        f"duplicates), 7000 realtime keys for generations [0] in {seconds} s ({phases})"
    )


def test_the_steps_are_medians_and_other_is_the_rest(tmp_path: Path) -> None:
    log = tmp_path / "layer.out"
    log.write_text(
        "\n".join(
            [
                _line(0, 40.0, "read 11.00 s, visits 6.00 s, views 20.00 s, commit 2.00 s"),  # warm-up
                _line(1, 30.0, f"read 8.00 s, visits 5.00 s, views 13.00 s, {FILTERS}, commit 2.50 s"),
                _line(2, 32.0, f"read 9.00 s, visits 6.00 s, views 14.00 s, {FILTERS}, commit 2.00 s"),
                _line(3, 34.0, f"read 10.00 s, visits 7.00 s, views 14.00 s, {FILTERS}, commit 2.00 s"),
            ]
        )
    )
    progress = tmp_path / "progress.jsonl"
    at = [100.0, 130.0, 157.0, 184.0, 211.0]
    progress.write_text(
        "\n".join(
            json.dumps(
                {
                    "batch_id": i,
                    "events": 500000,
                    "at": t,
                    "phases": {"read": 6.0, "visits": 5.0, "views": 13.0},
                }
            )
            for i, t in enumerate(at)
        )
    )
    found = steps(log, progress, skip=1)
    layer, floor = found["speed_layer"], found["floor"]
    assert layer["total"] == 32.0
    assert (layer["read"], layer["visits"], layer["views"], layer["commit"]) == (9.0, 6.0, 14.0, 2.0)
    assert layer["dedup rebuild"] == 0.0  # a step the log did not name is 0, not missing
    assert set(STEPS) <= set(layer) and set(STEPS) <= set(floor)
    assert layer["other"] == round(32.0 - (9.0 + 6.0 + 14.0 + 0.5 + 2.0), 3)
    assert floor["total"] == 27.0 and floor["other"] == 3.0
