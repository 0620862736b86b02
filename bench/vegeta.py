"""The API bench's load: vegeta (github.com/tsenart/vegeta), driven as a closed loop.

Why vegeta rather than a load generator of our own: it is maintained, reads a list of targets and
cycles through them, and reports latency percentiles, the request rate, status codes and errors
as JSON. `make setup` builds it from its Go module at a pinned version (toolchain/setup.sh) into
the cache's bin directory.

Closed loop: ``-rate=0`` with exactly C workers (``-workers`` = ``-max-workers`` = C) over at most
C keep-alive connections (``-max-connections``): each worker sends its next GET as soon as the
previous answer is read, so the API is as busy as C clients can make it, not paced by a rate we
chose. Bodies are read to the end and dropped (``-max-body=0``), so vegeta does not keep them.

The percentiles are vegeta's t-digest estimates (compression 100), not a sort of every latency;
checked once against the exact order statistics of a run's raw results (``vegeta encode``), they
agreed to well under a percent (docs/design.md, "Measured by hand").
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


class LoadFigures(TypedDict):
    """One measured run, in the shape bench/results/api.json has always had."""

    requests: int
    errors: int
    non_2xx: int
    seconds: float
    requests_per_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    connections: int


def installed(cache_dir: Path) -> Path:
    """The vegeta binary `make setup` built; exits with the remedy if it is missing."""
    binary = cache_dir / "bin" / "vegeta"
    if not binary.is_file():
        raise SystemExit(f"the load tool is missing ({binary}): run `make setup`")
    return binary


def figures(report: dict[str, Any], connections: int) -> LoadFigures:
    """Our result fields from a ``vegeta report -type=json`` object.

    vegeta counts a transport error (refused, reset, timed out) as status code 0 and any answer
    outside 200-399 as an error too; we keep the two apart as before: ``errors`` are the requests
    without an answer, ``non_2xx`` the answers with a status outside 200-299.
    """
    codes = {int(code): count for code, count in report["status_codes"].items()}
    latencies = report["latencies"]
    return LoadFigures(
        requests=report["requests"],
        errors=codes.get(0, 0),
        non_2xx=sum(count for code, count in codes.items() if code != 0 and not 200 <= code < 300),
        seconds=round(report["duration"] / NS_PER_S, 3),
        requests_per_s=report["rate"],
        p50_ms=latencies["50th"] / NS_PER_MS,
        p90_ms=latencies["90th"] / NS_PER_MS,
        p99_ms=latencies["99th"] / NS_PER_MS,
        max_ms=latencies["max"] / NS_PER_MS,
        connections=connections,
    )


@dataclass(frozen=True)
class ClosedLoop:
    """C connections sending GETs back to back through a list of URLs, for a given time."""

    binary: Path
    connections: int
    timeout_s: float = 10.0

    def version(self) -> str:
        """What ``vegeta -version`` says it is (setup.sh stamps the pinned version into it)."""
        out = subprocess.run([str(self.binary), "-version"], capture_output=True, text=True, check=True)
        fields = dict(line.split(":", 1) for line in out.stdout.splitlines() if ":" in line)
        return f"vegeta {fields.get('Version', '').strip() or 'unknown version'}"

    def warm_up(self, urls: Iterable[str], seconds: float) -> None:
        """The same load, unmeasured: connections opened, caches and the interpreter warm."""
        self._attack(urls, seconds, "/dev/null")

    def measure(self, urls: Iterable[str], seconds: float) -> LoadFigures:
        """One measured run: the attack's results go to a file that ``vegeta report`` reads."""
        with tempfile.TemporaryDirectory(prefix="vegeta-") as tmp:
            results = Path(tmp) / "results.bin"
            self._attack(urls, seconds, str(results))
            out = subprocess.run(
                [str(self.binary), "report", "-type=json", str(results)],
                capture_output=True,
                text=True,
                check=True,
            )
        return figures(json.loads(out.stdout), self.connections)

    def _attack(self, urls: Iterable[str], seconds: float, output: str) -> None:
        targets = "".join(f"GET {url}\n" for url in urls)
        if not targets:
            raise ValueError("no URLs to load")
        c = self.connections
        subprocess.run(
            [
                str(self.binary),
                "attack",
                "-rate=0",
                f"-workers={c}",
                f"-max-workers={c}",
                f"-connections={c}",
                f"-max-connections={c}",
                "-keepalive=true",
                "-max-body=0",
                f"-timeout={self.timeout_s}s",
                f"-duration={seconds}s",
                f"-output={output}",
            ],
            input=targets,
            text=True,
            check=True,
        )


@dataclass(frozen=True)
class Post:
    """One POST target: its URL, body and headers (vegeta's JSON target format)."""

    url: str
    body: bytes
    headers: dict[str, str]

    def target(self) -> dict[str, Any]:
        import base64

        return {
            "method": "POST",
            "url": self.url,
            "body": base64.b64encode(self.body).decode(),
            "header": {name: [value] for name, value in self.headers.items()},
        }


@dataclass(frozen=True)
class OpenLoop:
    """POSTs at a fixed rate, whatever the answers take (an open loop: browsers do not wait for
    each other), cycling through the targets; every answer is kept to be read back."""

    binary: Path
    timeout_s: float = 10.0
    max_workers: int = 512
    """At most this many requests in flight: a server that falls behind gets fewer requests a second
    than asked (the report says how many), rather than a load tool that eats the machine's CPU."""

    def attack(self, posts: Iterable[Post], rate: int, seconds: float, output: Path) -> None:
        targets = "".join(json.dumps(p.target()) + "\n" for p in posts)
        if not targets:
            raise ValueError("no targets")
        subprocess.run(
            [
                str(self.binary),
                "attack",
                "-format=json",
                f"-rate={rate}/1s",
                f"-max-workers={self.max_workers}",
                f"-duration={seconds}s",
                f"-timeout={self.timeout_s}s",
                "-keepalive=true",
                f"-output={output}",
            ],
            input=targets,
            text=True,
            check=True,
        )

    def report(self, results: Path) -> LoadFigures:
        out = subprocess.run(
            [str(self.binary), "report", "-type=json", str(results)],
            capture_output=True,
            text=True,
            check=True,
        )
        return figures(json.loads(out.stdout), 0)

    def answers(self, results: Path) -> list[tuple[int, bytes]]:
        """(status code, body) of every request of the attack (code 0: no answer)."""
        import base64

        out = subprocess.run(
            [str(self.binary), "encode", "-to=json", str(results)], capture_output=True, text=True, check=True
        )
        answers = []
        for line in out.stdout.splitlines():
            hit = json.loads(line)
            answers.append((int(hit["code"]), base64.b64decode(hit.get("body") or "")))
        return answers
