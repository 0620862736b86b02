"""Start, stop and inspect the local stack.

Each service is a process of the one supervisor (stack.supervisor): tracked by a pid file under
``var/run`` that also records its start time; ``down`` signals exactly those processes, after
checking that each is still the one we started (a pid can be reused), and never looks processes up
by name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from config.settings import Settings
from stack.services import Service, ServiceError, all_services, cluster_services, port_open

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    pid: int | None
    running: bool
    healthy: bool
    address: str
    detail: str


def _owned_pid(service: Service) -> int | None:
    """The pid from the pid file if that process is alive and is the one we started."""
    return service.supervised.pid()


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"(no log at {path})"


def _logs(service: Service, out: Path) -> str:
    """The ends of what a service printed and of its own log: why it did not come up."""
    return f"--- {out} ---\n{_tail(out)}\n--- {service.log_file} ---\n{_tail(service.log_file)}"


def _probe(service: Service) -> str | None:
    """None when healthy, else why not."""
    try:
        service.probe()
    except Exception as exc:
        return str(exc) or type(exc).__name__
    return None


def start(service: Service, timeout: float) -> bool:
    """Start one service unless it already runs; wait for its probe. True if we started it."""
    if _owned_pid(service) is not None and _probe(service) is None:
        log.info("%s already running", service.name)
        return False
    host, port = service.address
    if _owned_pid(service) is None and port_open(host, port):
        raise ServiceError(
            f"{service.name}: {host}:{port} is taken by a process this stack did not start; "
            "stop it or change the port in the settings"
        )
    service.settings.log_dir.mkdir(parents=True, exist_ok=True)
    service.prepare()
    out = service.settings.log_dir / f"{service.name}.out"
    proc = service.supervised.start(
        service.command(), out, cwd=service.settings.var_dir, env=service.environment()
    )

    def attempt() -> str | None:
        """One look: raises if the process died, else the probe's complaint (None: healthy)."""
        if proc.poll() is not None:
            raise ServiceError(
                f"{service.name} exited with code {proc.returncode} during start-up.\n" + _logs(service, out)
            )
        return _probe(service)

    last_error = Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_fixed(0.25),
        retry=retry_if_result(lambda error: error is not None),
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else "not probed yet",
    )(attempt)
    if last_error is None:
        log.info("%s up on %s:%d (pid %d)", service.name, host, port, proc.pid)
        return True
    stop(service)
    raise ServiceError(
        f"{service.name} did not answer its probe within {timeout:.0f} s ({last_error}).\n"
        + _logs(service, out)
    )


def stop(service: Service, timeout: float = 30.0) -> bool:
    """Stop our process of this service, gracefully first. True if something was stopped."""
    stopped = service.supervised.stop(timeout)
    if stopped is None:
        return False
    log.info("%s stopped (pid %d)", service.name, stopped.pid)
    return True


Catalog = Callable[[Settings], list[Service]]


def _select(
    settings: Settings, names: Iterable[str] | None, catalog: Catalog = all_services
) -> list[Service]:
    services = catalog(settings)
    if names is None:
        return services
    wanted = set(names)
    unknown = wanted - {s.name for s in services}
    if unknown:
        raise ServiceError(f"unknown service(s): {', '.join(sorted(unknown))}")
    return [s for s in services if s.name in wanted]


def up(settings: Settings, names: Iterable[str] | None = None, catalog: Catalog = all_services) -> list[str]:
    """Start the stack (or the named services); returns the names of those this call started.

    ``catalog`` picks the services: the infrastructure (default) or ``cluster_services``.
    """
    started: list[str] = []
    try:
        for service in _select(settings, names, catalog):
            if start(service, settings.stack_start_timeout_s):
                started.append(service.name)
    except ServiceError:
        for name in reversed(started):
            stop(_select(settings, [name], catalog)[0])
        raise
    return started


def down(
    settings: Settings, names: Iterable[str] | None = None, catalog: Catalog = all_services
) -> list[str]:
    """Stop what ``up`` started, in reverse order; returns the names actually stopped."""
    return [s.name for s in reversed(_select(settings, names, catalog)) if stop(s)]


def cluster_up(settings: Settings) -> list[str]:
    """Start the local Spark standalone cluster (master, then workers)."""
    return up(settings, catalog=cluster_services)


def cluster_down(settings: Settings) -> list[str]:
    """Stop the local Spark standalone cluster (workers, then master)."""
    return down(settings, catalog=cluster_services)


def status(settings: Settings, catalog: Catalog = all_services) -> list[ServiceStatus]:
    result = []
    for service in catalog(settings):
        pid = _owned_pid(service)
        error = _probe(service) if pid is not None else "not running"
        host, port = service.address
        result.append(
            ServiceStatus(
                name=service.name,
                pid=pid,
                running=pid is not None,
                healthy=error is None,
                address=f"{host}:{port}",
                detail=error or "ok",
            )
        )
    return result
