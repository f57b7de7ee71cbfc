"""The ``blox-slurm`` command line.

Exit codes: 0 success, 1 runtime failure (Slurm unreachable, a daemon died), 2 bad input
(config, trace, option). Commands that report data take ``--json`` for machine-readable output.
"""

from __future__ import annotations

import typer

from . import __version__

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


# Sub-commands contributed by the world modules register themselves here.
from .sim.cli import register as register_sim  # noqa: E402

register_sim(app)
from .telemetry.cli import register as register_telemetry  # noqa: E402

register_telemetry(app)
from .emulator.cli import register as register_emulator  # noqa: E402

register_emulator(app)
from .slurm.controller_cli import register as register_controller  # noqa: E402

register_controller(app)
from .demo.run import register as register_demo  # noqa: E402

register_demo(app)
