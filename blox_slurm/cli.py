"""The ``blox-slurm`` command line.

Exit codes: 0 success, 1 runtime failure (Slurm unreachable, a daemon died), 2 bad input
(config, trace, option). Commands that report data take ``--json`` for machine-readable output.

Each command is a plain function in the module of the world it drives, importable and testable
on its own; this module only lays them out, in the help panels a user reads them by.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from . import __version__
from .demo.run import demo
from .emulator.cli import PASS_THROUGH, emulator_app, fake_train
from .logs import setup_logging
from .sim.cli import compare, plot, policies, simulate
from .slurm.controller_cli import calibrate, handback, run
from .slurm.inspect_cli import doctor, explain, queue, report, status
from .telemetry.cli import agent

SIMULATE = "Simulate and compare"
CONTROLLER = "Controller"
EMULATOR = "Emulator and demo"
TELEMETRY = "Telemetry"
USERS = "For users"

app = typer.Typer(
    name="blox-slurm",
    help="Composable Blox scheduling policies: simulate them, emulate Slurm, drive a real cluster.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"blox-slurm {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Composable Blox scheduling policies beside Slurm."""
    setup_logging(daemon=False)  # `run`, `agent` and `demo` set their own


def _add(panel: str, *commands: Callable[..., None], **settings: Any) -> None:
    """Put ``commands`` on the app in ``panel``, each named after its function (``fake_train``
    is ``fake-train``), so a command's name is the one place it is spelled."""
    for command in commands:
        app.command(rich_help_panel=panel, **settings)(command)


_add(SIMULATE, simulate, compare, policies, plot)
_add(CONTROLLER, run, status, explain, report, handback, calibrate, doctor)
_add(USERS, queue)
_add(EMULATOR, demo)
_add(EMULATOR, fake_train, **PASS_THROUGH)
app.add_typer(emulator_app, name="emulator", rich_help_panel=EMULATOR)  # a group: listed last
_add(TELEMETRY, agent)
