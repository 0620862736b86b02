"""The pre-commit hooks run make lint's checks, and the commit-msg hook holds a message's shape."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
CHECK = ROOT / "toolchain" / "check-commit-msg.sh"


def _hooks() -> dict[str, dict[str, object]]:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    assert {r["repo"] for r in config["repos"]} == {"local"}, "local hooks: no download"
    return {h["id"]: h for r in config["repos"] for h in r["hooks"]}


def test_the_hooks_run_every_check_of_make_lint() -> None:
    lint = re.search(r"^lint:.*\n\t@(.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert lint is not None
    checks = [c.strip() for c in lint[1].split("&&")]
    entries = [str(h["entry"]).replace('"', "") for h in _hooks().values()]
    for check in checks:  # "$(VENV)/bin/ruff check ." runs as "ruff check ."
        command = re.sub(r"^\$\(VENV\)/bin/|^\$\(PY\) ", "", check)
        command = command.replace("$(LAMBDA_CACHE_DIR)", "${LAMBDA_CACHE_DIR:-.cache}")
        assert any(command in entry for entry in entries), check


def _check(message: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    file = tmp_path / "COMMIT_EDITMSG"
    file.write_text(message)
    return subprocess.run(["bash", str(CHECK), str(file)], capture_output=True, text=True)


@pytest.mark.parametrize(
    "message",
    [
        "Add the configuration reference\n\nGenerated from the settings, checked by a test.\n",
        "x" * 72 + "\n\nbody\n# Please enter the commit message\n",
        "Subject\n\nbody\n# ------------------------ >8 ------------------------\n" + "y" * 100 + "\n",
        "Merge branch 'docs'\n",
        "fixup! Add the configuration reference\n",
    ],
)
def test_a_good_message_passes(message: str, tmp_path: Path) -> None:
    assert _check(message, tmp_path).returncode == 0


@pytest.mark.parametrize(
    ("message", "says"),
    [
        ("x" * 73 + "\n\nbody\n", "73 characters, at most 72"),
        ("A subject alone\n", "a blank line, then a body"),
        ("A subject\nno blank line\n", "a blank line, then a body"),
        ("\n\n# only comments\n", "empty"),
    ],
)
def test_a_bad_message_is_refused_saying_why(message: str, says: str, tmp_path: Path) -> None:
    done = _check(message, tmp_path)
    assert done.returncode == 1
    assert says in done.stdout
