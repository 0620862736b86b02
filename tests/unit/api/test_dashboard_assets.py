"""The dashboard's files: the vendored library is the pinned build, and the page only refers to
files the API serves (on this origin)."""

from __future__ import annotations

import hashlib
import re

from api.routes.dashboard import ASSETS, DASHBOARD_DIR

VENDOR = DASHBOARD_DIR / "vendor" / "uplot"


def test_the_vendored_uplot_matches_its_checksums_and_keeps_its_licence() -> None:
    lines = (VENDOR / "SHA256SUMS").read_text().splitlines()
    sums = {name: digest for digest, name in (line.split() for line in lines)}
    assert set(sums) == {"uPlot.esm.js", "uPlot.min.css", "LICENSE"}
    for name, digest in sums.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name
    assert "MIT License" in (VENDOR / "LICENSE").read_text()


def test_the_page_refers_only_to_served_files_on_this_origin() -> None:
    html = (DASHBOARD_DIR / "index.html").read_text()
    refs = re.findall(r'(?:src|href)="([^"#]+)"', html)
    local = {r.removeprefix("dashboard/") for r in refs if r.startswith("dashboard/")}
    assert local and local <= set(ASSETS)
    assert set(refs) - {f"dashboard/{x}" for x in local} <= {"data:,", "docs"}
    script = (DASHBOARD_DIR / "dashboard.js").read_text()
    assert re.findall(r'from "([^"]+)"', script) == ["./vendor/uplot/uPlot.esm.js", "./filters.js"]
    assert "://" not in script  # every request is relative to the page
    for asset in ASSETS:
        assert (DASHBOARD_DIR / asset).is_file(), asset
