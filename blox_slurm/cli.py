"""The ``blox-slurm`` command line.

Exit codes: 0 success, 1 runtime failure (Slurm unreachable, a daemon died), 2 bad input
(config, trace, option). Commands that report data take ``--json`` for machine-readable output.

Each command is a plain function in the module of the world it drives, importable and testable
on its own; this module only lays them out, in the help panels a user reads them by.
"""

from __future__ import annotations

import atexit
import gc
from typing import Any, ClassVar

import typer

from . import __version__
from .cli_lazy import LazyCommand, LazyGroup
from .logs import setup_logging

# At exit, after every exit handler registered later (they run last-registered first), the
# interpreter's final collections would walk every object a command made (a simulation's job
# records) only to free them anyway: frozen, they are freed without the walk, 30-50 ms of a
# Figure-6 run. At import, so once per process however often the app runs in it.
atexit.register(gc.freeze)

SIMULATE = "Simulate and compare"
CONTROLLER = "Controller"
EMULATOR = "Emulator and demo"
TELEMETRY = "Telemetry"
USERS = "For users"


class Commands(LazyGroup):
    """blox-slurm's commands, imported when used (see cli_lazy); ``_add`` fills ``lazy``."""

    lazy: ClassVar[dict[str, LazyCommand]] = {}


app = typer.Typer(
    name="blox-slurm",
    cls=Commands,
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


def _add(panel: str, *targets: str, **settings: Any) -> None:
    """Put the commands at ``targets`` (``module:function``) on the app in ``panel``, in
    order, each named after its function (``fake_train`` is ``fake-train``) so a command's
    name is spelled in one place; a ``module:name_app`` target is a group (``emulator``)."""
    for target in targets:
        command = LazyCommand(target, panel, settings)
        Commands.lazy[command.name] = command


#: ``fake-train``: every argument, ``--help`` too, goes to the fake job's own parser.
PASS_THROUGH: dict[str, Any] = {
    "context_settings": {"allow_extra_args": True, "ignore_unknown_options": True},
    "add_help_option": False,
}

_add(SIMULATE, "blox_slurm.sim.cli:simulate", "blox_slurm.sim.cli:compare",
     "blox_slurm.sim.cli:policies", "blox_slurm.sim.cli:plot")
_add(SIMULATE, "blox_slurm.sim.sweep_cli:sweep_app")  # a group: listed last
_add(CONTROLLER, "blox_slurm.slurm.controller_cli:run", "blox_slurm.slurm.inspect_cli:status",
     "blox_slurm.slurm.inspect_cli:explain", "blox_slurm.slurm.inspect_cli:report",
     "blox_slurm.slurm.controller_cli:handback", "blox_slurm.slurm.controller_cli:calibrate",
     "blox_slurm.slurm.inspect_cli:doctor")
_add(USERS, "blox_slurm.slurm.inspect_cli:queue")
_add(EMULATOR, "blox_slurm.demo.run:demo")
_add(EMULATOR, "blox_slurm.emulator.cli:fake_train", **PASS_THROUGH)
_add(EMULATOR, "blox_slurm.emulator.cli:emulator_app")  # a group: listed last
_add(TELEMETRY, "blox_slurm.telemetry.cli:agent")
