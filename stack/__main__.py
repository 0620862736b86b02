"""``python -m stack up|down|ps``: the local stack's command line (behind ``make up/down/ps``)."""

from __future__ import annotations

import argparse
import logging
import sys

from rich.console import Console
from rich.table import Table

from config.settings import get_settings
from stack import control
from stack.services import ServiceError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stack", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "ps"])
    parser.add_argument("services", nargs="*", help="only these services (kafka, ferretdb, redis)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = get_settings()
    names = args.services or None
    console = Console()
    try:
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


def _print_status(console: Console, settings: object) -> int:
    from config.settings import Settings

    assert isinstance(settings, Settings)
    table = Table(title=f"local stack ({settings.var_dir})")
    for column in ("service", "pid", "address", "state", "probe"):
        table.add_column(column)
    healthy = True
    for st in control.status(settings):
        state = "[green]up[/]" if st.healthy else ("[yellow]unhealthy[/]" if st.running else "[red]down[/]")
        healthy &= st.healthy
        table.add_row(st.name, str(st.pid or "-"), st.address, state, st.detail)
    console.print(table)
    return 0 if healthy else 3


if __name__ == "__main__":
    sys.exit(main())
