"""The figures quoted in the docs are the JSON results' own (bench.figures)."""

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
    page = (figures.ROOT / "docs" / "scaling.md").read_text()
    inline = figures.INLINE.search(page)
    assert inline is not None
    edited = page.replace(inline[0], inline[1] + inline[3] + "1" + inline[4])
    assert figures.rendered(edited) == page
    block = figures.BLOCK.search(page)
    assert block is not None
    number = re.search(r"\d[\d,.]*", block[4])
    assert number is not None
    body = block[4][: number.start()] + "9" + block[4][number.start() :]
    assert figures.rendered(page.replace(block[4], body)) == page


def test_every_block_is_named_once_and_every_reference_resolves() -> None:
    found = list(figures.blocks())
    names = [name for _, name, _ in found]
    assert found and len(names) == len(set(names)), "a block's name is quoted in one place only"
    for _, _, template in found:
        figures.render_block(template)  # raises FigureError for a path no result has


def test_the_templates_live_in_the_docs_not_in_the_code() -> None:
    code = (figures.ROOT / "bench" / "figures.py").read_text()
    assert "TABLES" not in code
    assert len(code.splitlines()) < 300


def test_figures_in_prose_name_where_they_come_from() -> None:
    prose = "Ingest ran at <!-- figure:{ingest:pipeline/records_per_s:,} -->x<!-- /figure --> records/s.\n"
    with pytest.raises(figures.FigureError, match="figure-sources"):
        figures.rendered(prose)
    with pytest.raises(figures.FigureError, match="without a figure"):
        figures.rendered("no figures\n<!-- figure-sources -->\n<!-- /figure-sources -->\n")
    page = figures.rendered(prose + "<!-- figure-sources -->\n<!-- /figure-sources -->\n")
    assert "`bench/results/ingest.json`" in page
    assert f"`{figures.COMMANDS['ingest']}`" in page


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
