"""The ``blox-slurm agent`` command (put on the app by :mod:`blox_slurm.cli`)."""

from __future__ import annotations

import enum
import logging
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from ..logs import setup_logging
from ..systemd import Notifier, Watchdog
from .agent import AgentStats, run_agent
from .base import GpuTelemetry, TelemetryError

_HOST = socket.gethostname().split(".")[0]  # Slurm node names are short host names


class Backend(enum.StrEnum):
    nvml = "nvml"
    emulated = "emulated"


def read_token(path: Path) -> str:
    """The shared token from ``path``: stripped, non-empty. Kept in a file (mode 0600), never
    on the command line, where every user on the node could read it in ``ps``."""
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise typer.BadParameter(f"cannot read token file {path}: {exc.strerror}") from exc
    if not token:
        raise typer.BadParameter(f"token file {path} is empty")
    return token


def make_backend(backend: Backend, node: str, gpus: int, allocations: Path | None) -> GpuTelemetry:
    if backend is Backend.nvml:
        from .nvml import NvmlTelemetry

        return NvmlTelemetry()
    from .emulated import EmulatedTelemetry, allocations_from_file

    if allocations is None:
        raise typer.BadParameter("--backend emulated needs --allocations FILE")
    return EmulatedTelemetry(node, gpus, allocations_from_file(allocations))


def _supervise(stop: threading.Event, node: str, url: str,
               interval: float) -> Callable[[AgentStats], None]:
    """Under systemd (Type=notify): ready once the GPUs can be read, status and watchdog
    after every tick. A tick is at most a sample plus a bounded POST with retries, so one
    not finished in three intervals and a minute is a hung agent for systemd to restart."""
    notifier = Notifier()
    watchdog = Watchdog(notifier, allowance=3 * interval + 60)
    notifier.ready(f"sampling {node} every {interval:g} s for {url}")
    watchdog.activate()
    watchdog.start(stop)

    def tick(stats: AgentStats) -> None:
        watchdog.progress()
        notifier.status(f"{stats.sampled} samples, {stats.sent} sent, {stats.dropped} "
                        "dropped")

    return tick


def agent(
    controller: Annotated[
        str, typer.Option("--controller", help="Controller URL, e.g. http://ctl:9090")
    ],
    token_file: Annotated[Path, typer.Option("--token-file", help="File holding the token.")],
    node: Annotated[str, typer.Option("--node", help="This node's Slurm name.")] = _HOST,
    interval: Annotated[
        float, typer.Option("--interval", min=0.1, help="Seconds between samples.")
    ] = 10.0,
    backend: Annotated[
        Backend, typer.Option("--backend", help="Where samples come from.")
    ] = Backend.nvml,
    gpus: Annotated[
        int, typer.Option("--gpus", min=0, help="GPUs on this node (emulated backend).")
    ] = 4,
    allocations: Annotated[
        Path | None,
        typer.Option("--allocations", help="JSON file of current allocations (emulated backend)."),
    ] = None,
) -> None:
    """Sample this node's GPUs and ship them to the controller until SIGTERM/SIGINT."""

    setup_logging(daemon=True, level=logging.INFO)
    token = read_token(token_file)
    try:
        source = make_backend(backend, node, gpus, allocations)
    except TelemetryError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    on_tick = _supervise(stop, node, controller, interval)
    try:
        stats = run_agent(source, controller, token, node, interval, stop, on_tick=on_tick)
    except ValueError as exc:  # bad URL or node name
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    finally:
        source.close()
    logging.getLogger(__name__).info("agent stopped: %s", stats)

