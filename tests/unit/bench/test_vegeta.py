"""bench/vegeta.py: vegeta's JSON report read into the API bench's fields, and one real closed loop
against an in-process HTTP server (skipped when `make setup` has not built vegeta)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bench.vegeta import ClosedLoop, figures, installed
from config.settings import get_settings

# A report as `vegeta report -type=json` prints it (v12.13.0), trimmed to the fields we read.
REPORT = {
    "latencies": {
        "total": 23967086191,
        "mean": 5188804,
        "50th": 5781886,
        "90th": 8930234,
        "95th": 10144072,
        "99th": 13088982,
        "max": 21407850,
        "min": 367289,
    },
    "duration": 3000193657,
    "wait": 2805313,
    "requests": 4630,
    "rate": 1543.23,
    "status_codes": {"0": 5, "200": 3080, "204": 6, "302": 1, "404": 1534, "503": 4},
    "errors": ["404 Not Found", "connection refused"],
}


def test_figures_keep_the_result_shape() -> None:
    assert figures(REPORT, connections=8) == {
        "requests": 4630,
        "errors": 5,
        "non_2xx": 1 + 1534 + 4,
        "seconds": 3.0,
        "requests_per_s": 1543.23,
        "p50_ms": 5.781886,
        "p90_ms": 8.930234,
        "p99_ms": 13.088982,
        "max_ms": 21.40785,
        "connections": 8,
    }


def test_figures_of_an_empty_run() -> None:
    empty = {
        "latencies": {"50th": 0, "90th": 0, "99th": 0, "max": 0},
        "duration": 0,
        "requests": 0,
        "rate": 0,
        "status_codes": {},
    }
    got = figures(empty, connections=2)
    assert (got["requests"], got["errors"], got["non_2xx"], got["requests_per_s"]) == (0, 0, 0, 0)


def test_missing_binary_names_the_remedy(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="make setup"):
        installed(tmp_path)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn

    def do_GET(self) -> None:
        status, body = (200, b'{"series": [1, 2, 3]}') if self.path.startswith("/ok") else (404, b"{}")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_closed_loop_against_a_local_server(server: str) -> None:
    binary = get_settings().cache_dir / "bin" / "vegeta"
    if not binary.is_file():
        pytest.skip("vegeta is not built (make setup)")
    load = ClosedLoop(binary, connections=2)
    assert load.version().startswith("vegeta ")
    urls = [f"{server}/ok?a=1", f"{server}/ok?b=2", f"{server}/missing"]
    load.warm_up(urls, 0.3)
    got = load.measure(urls, 1.0)
    assert got["requests"] > 0 and got["errors"] == 0
    # The targets are taken in turn, so a third of the requests (give or take the last round)
    # asked for the missing page.
    assert abs(got["non_2xx"] - got["requests"] / 3) <= 2
    assert 0 < got["p50_ms"] <= got["p90_ms"] <= got["p99_ms"] <= got["max_ms"]
    assert 0.5 < got["seconds"] <= 1.1
    assert got["requests_per_s"] == pytest.approx(got["requests"] / got["seconds"], rel=0.01)
    assert got["connections"] == 2
