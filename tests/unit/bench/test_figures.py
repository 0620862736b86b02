"""The figures quoted in the README and docs/ are the JSON results' own (bench.figures)."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from bench import figures
from bench.common import provenance


def test_every_quoted_figure_equals_its_json_result() -> None:
    assert figures.stale() == [], "run `python -m bench.figures` after a benchmark wrote a result"


def test_a_figure_edited_by_hand_is_caught() -> None:
    readme = (figures.ROOT / "README.md").read_text()
    inline = figures.INLINE.search(readme)
    assert inline is not None
    edited = readme.replace(inline[0], inline[1] + inline[3] + "1" + inline[4])
    assert figures.rendered(edited) == readme
    table = figures.TABLE.search(readme)
    assert table is not None
    number = re.search(r"\d[\d,.]*", table[3])
    assert number is not None
    body = table[3][: number.start()] + "9" + table[3][number.start() :]
    assert figures.rendered(readme.replace(table[3], body)) == readme


def test_every_table_is_quoted_and_every_reference_resolves() -> None:
    quoted = {m[2] for path in figures.documents() for m in figures.TABLE.finditer(path.read_text())}
    assert quoted == set(figures.TABLES)
    for table in figures.TABLES.values():
        figures.render_table(table)  # raises FigureError for a path no result has


def test_a_reference_to_a_missing_value_is_an_error_naming_it() -> None:
    with pytest.raises(figures.FigureError, match="no 'nope'"):
        figures.render_template("{batch:full_recompute/nope}")
    assert figures.render_template("{batch:full_recompute/documents_written/*:,}") == format(
        sum(
            json.loads((figures.RESULTS_DIR / "batch.json").read_text())["full_recompute"][
                "documents_written"
            ].values()
        ),
        ",",
    )


def _runs(result: dict[str, object]) -> list[dict[str, object]]:
    runs = result.get("runs")
    if "finished_at" not in result and isinstance(runs, dict):
        return [r for r in runs.values() if isinstance(r, dict)]
    return [result]


def test_every_result_names_a_commit_of_this_repository() -> None:
    shallow = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=figures.ROOT, capture_output=True, text=True
    )
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("needs the repository's whole history")
    for path in sorted(figures.RESULTS_DIR.glob("*.json")):
        for run in _runs(json.loads(path.read_text())):
            machine = run["machine"]
            assert isinstance(machine, dict)
            commit = machine["commit"]
            found = subprocess.run(
                ["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=figures.ROOT, capture_output=True
            )
            assert found.returncode == 0, f"{path.name}: commit {commit} is not in the repository"


def test_a_new_result_records_the_commit_and_whether_the_checkout_was_dirty() -> None:
    recorded = provenance()
    assert set(recorded) == {"commit", "dirty"}
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=figures.ROOT, capture_output=True, text=True, check=True
    )
    assert recorded["commit"] == head.stdout.strip()
    assert isinstance(recorded["dirty"], bool)
