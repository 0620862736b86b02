"""``python -m stack up|down|ps``: the local stack's command line (behind ``make up/down/ps``)."""

from __future__ import annotations

import argparse
import logging
import sys

from rich.console import Console
from rich.table import Table

from config.settings import Settings, get_settings
from stack import control, jobs
from stack.services import (
    ServiceError,
    all_services,
    cluster_services,
    container_worker_argv,
    container_worker_listening,
    spark_home,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stack", description=__doc__)
    commands = [
        "up",
        "down",
        "ps",
        "cluster-up",
        "cluster-down",
        "cluster-ps",
        "spark-worker",
        "spark-worker-probe",
    ]
    parser.add_argument("command", choices=commands)
    parser.add_argument("services", nargs="*", help="only these services (kafka, ferretdb, redis)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = get_settings()
    names = args.services or None
    console = Console()
    if args.command == "spark-worker-probe":  # the container worker's health check
        return 0 if container_worker_listening(settings) else 1
    if args.command == "spark-worker":  # a container's one process: replaced by the worker JVM
        import os

        argv = container_worker_argv(settings)
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "PYSPARK_PYTHON": sys.executable}
        os.execve(argv[0], argv, env)
    try:
        if args.command.startswith("cluster-"):
            return _cluster(console, settings, args.command.removeprefix("cluster-"))
        if args.command == "up":
            with console.status("starting the local stack..."):
                control.up(settings, names)
            _print_status(console, settings)
        elif args.command == "down":
            stopped = control.down(settings, names)
            console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        else:
            return _print_status(console, settings)
    except ServiceError as exc:
        console.print(f"[bold red]error:[/] {exc}", highlight=False)
        return 1
    return 0


def _cluster(console: Console, settings: Settings, command: str) -> int:
    """The local Spark standalone cluster: a master and settings.spark_cluster_workers workers."""
    if command == "up":
        with console.status("starting the local Spark cluster..."):
            control.cluster_up(settings)
        code = _print_status(console, settings, cluster=True)
        console.print(f"jobs use it with LAMBDA_SPARK_MASTER={settings.spark_cluster_url}", highlight=False)
        return code
    if command == "down":
        stopped = control.cluster_down(settings)
        console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        return 0
    return _print_status(console, settings, cluster=True)


def _print_status(console: Console, settings: Settings, cluster: bool = False) -> int:
    table = Table(title=f"local {'Spark cluster' if cluster else 'stack'} ({settings.var_dir})")
    for column in ("service", "pid", "address", "state", "probe"):
        table.add_column(column)
    healthy = True
    for st in control.status(settings, cluster_services if cluster else all_services):
        state = "[green]up[/]" if st.healthy else ("[yellow]unhealthy[/]" if st.running else "[red]down[/]")
        healthy &= st.healthy
        table.add_row(st.name, str(st.pid or "-"), st.address, state, st.detail)
    console.print(table)
    if not cluster:
        _print_jobs(console, settings)
    return 0 if healthy else 3


def _print_jobs(console: Console, settings: Settings) -> None:
    """The platform's background jobs under their keepers: a job that keeps dying shows here."""
    table = Table(title="background jobs (restarted by their keeper when they die)")
    for column in ("job", "keeper pid", "job pid", "state", "restarts", "last exit"):
        table.add_column(column)
    for name in jobs.NAMES:
        st = jobs.status(settings, name)
        colour = {"up": "green", "restarting": "yellow"}.get(st.state, "red")
        state = f"[{colour}]{st.state}[/]" + (f": {st.gave_up}" if st.gave_up else "")
        last = "-" if st.last_exit is None else str(st.last_exit)
        table.add_row(name, str(st.keeper_pid or "-"), str(st.job_pid or "-"), state, str(st.restarts), last)
    console.print(table)


if __name__ == "__main__":
    sys.exit(main())
