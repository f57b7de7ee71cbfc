"""``blox-slurm run | handback | calibrate``: the commands that act for the controller (the
read-only ones are in :mod:`inspect_cli`).

Exit codes: 0 success; 1 Slurm unreachable or a runtime failure; 2 bad input (config, job id).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..logs import console, setup_logging
from ..systemd import HUNG_ROUND_SECONDS, Notifier, Watchdog
from .backends import select_backend
from .calibrate import Timings
from .calibrate import calibrate as measure
from .cli_common import (
    DEFAULT_CONFIG,
    ConfigOpt,
    JsonOpt,
    emit,
    errors,
    load_controller,
    open_store,
    store_of,
)
from .client import SlurmError
from .controller import Controller, RoundReport
from .controller import handback as release_held
from .controller_config import ConfigError, ControllerConfig
from .job_submit import heartbeat_age, heartbeat_fresh
from .queue_view import publish

log = logging.getLogger(__name__)


def _check_slurm_conf(conf: str | None) -> None:
    """Slurm's commands retry a missing slurm.conf for 60 s per call, silently."""
    if conf and not (os.path.isfile(conf) and os.access(conf, os.R_OK)):
        raise ConfigError(f"slurm.conf {conf} is not a readable file: set [controller] "
                          "slurm_conf (or SLURM_CONF) to the cluster's slurm.conf")


def _preflight(ctl: Controller) -> None:
    """The round's own checks, once before the first round: a controller that could only
    fail every round refuses to start, with the reason (slurmctld down: exit 1)."""
    beat = Path(ctl.cfg.heartbeat).parent
    if not ctl.cfg.dry_run and not (beat.is_dir() and os.access(beat, os.W_OK | os.X_OK)):
        raise ConfigError(f"the heartbeat's directory {beat} is missing or not writable: "
                          "create it, or set [controller] heartbeat")
    try:
        nodes = ctl.client.list_nodes()
    except SlurmError as exc:
        raise SlurmError(f"cannot read Slurm's nodes at start-up: {exc}") from None
    problem = ctl.misconfigured(nodes)
    if problem is not None:
        raise ConfigError(problem)


def _telemetry(cfg: ControllerConfig, ctl: Controller) -> Any:
    """Start the agents' endpoint (and /metrics) when configured; returns the receiver."""
    if not cfg.telemetry_listen:
        return None
    from ..telemetry.buffer import TelemetryBuffer
    from ..telemetry.receiver import TelemetryReceiver

    if not cfg.telemetry_token_file:
        raise ConfigError("telemetry_listen needs telemetry_token_file")
    try:
        token = Path(cfg.telemetry_token_file).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"telemetry_token_file: {exc}") from None
    if not token:
        raise ConfigError(f"{cfg.telemetry_token_file} is empty")
    host, _, port = cfg.telemetry_listen.rpartition(":")
    if not port.isdigit():
        raise ConfigError(f"telemetry_listen {cfg.telemetry_listen!r}: expected HOST:PORT")
    # Keep a whole window per GPU for agents sampling every 10 s or slower (the agent's default).
    ctl.telemetry = TelemetryBuffer(per_gpu=int(cfg.telemetry_window / 10) + 12)
    try:
        return TelemetryReceiver(token, host=host or "127.0.0.1", port=int(port),
                                 buffer=ctl.telemetry, metrics=ctl.metrics).start()
    except OSError as exc:
        raise ConfigError(f"telemetry_listen {cfg.telemetry_listen}: {exc.strerror or exc} "
                          "(another controller or process has it? choose a free port)") from None


class _Service:
    """What the daemon tells the world besides Slurm: systemd (readiness, status, watchdog:
    :mod:`blox_slurm.systemd`), the operator's terminal (``--verbose``), the users (the queue
    file) and the agents (the telemetry endpoint, served only by the active controller)."""

    def __init__(self, cfg: ControllerConfig, ctl: Controller, banner: str,
                 verbose: bool) -> None:
        self.cfg, self.ctl, self.banner, self.verbose = cfg, ctl, banner, verbose
        self.notifier = Notifier()
        self.watchdog = Watchdog(self.notifier, cfg.round_seconds + HUNG_ROUND_SECONDS)
        self.receivers: list[Any] = []

    def start(self, stop: threading.Event) -> None:
        self.notifier.ready(f"started; {self.banner}")
        self.watchdog.start(stop)

    def active(self) -> None:
        self.receivers.append(_telemetry(self.cfg, self.ctl))
        self.watchdog.activate()
        self.notifier.status(f"active; {self.banner}")
        console(stderr=True).print(self.banner)

    def round(self, r: RoundReport) -> None:
        self.watchdog.progress()
        line = (f"round {r.round_id}: {r.jobs} jobs ({r.pending} waiting), "
                f"{len(r.decisions.start) if r.decisions else 0} start, "
                f"{len(r.plan.preempt) if r.plan else 0} preempt, "
                f"{r.slurm_calls} Slurm calls, {r.seconds:.2f} s"
                + (f", error: {r.error}" if r.error else ""))
        self.notifier.status(line)
        if self.verbose:
            console(stderr=True).print(line)
        if self.cfg.queue_file and not self.cfg.dry_run:
            try:
                publish(self.ctl.store, self.cfg.queue_file, self.cfg.lease_seconds)
            except OSError as exc:
                log.warning("cannot write the queue file %s: %s", self.cfg.queue_file, exc)

    def stop(self) -> None:
        self.notifier.stopping()
        for receiver in filter(None, self.receivers):
            receiver.stop()


def run(
    config: ConfigOpt = DEFAULT_CONFIG,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Shadow mode: decide and record, apply nothing, write no "
        "heartbeat.")] = False,
    rounds: Annotated[int | None, typer.Option(help="Stop after N rounds.")] = None,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Log at INFO and print one line per round.")] = False,
) -> None:
    """Run the controller: every round, observe Slurm, decide with the composition, apply.

    SIGTERM/SIGINT finish the current round, hand back held jobs if configured, exit 0.
    Under systemd (Type=notify) it reports readiness and status and feeds the watchdog.
    """
    stop = threading.Event()  # handlers first: a SIGTERM during start-up still exits 0
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    setup_logging(daemon=True, level=logging.INFO if verbose else logging.WARNING)
    with errors():
        cfg, comp = load_controller(config)
        if dry_run:
            cfg = cfg.model_copy(update={"dry_run": True})
        _check_slurm_conf(cfg.slurm_conf or os.environ.get("SLURM_CONF"))
        client, why = select_backend(cfg.slurm_conf, cfg.backend)
        ctl = Controller(cfg, comp, client, open_store(cfg.store))
        _preflight(ctl)
        service = _Service(cfg, ctl, f"{why}; composition {comp.name}; partitions "
                           f"{','.join(cfg.partitions)}{'; DRY RUN' if cfg.dry_run else ''}",
                           verbose)
        service.start(stop)
        try:
            ctl.run(stop, rounds, service.round, on_active=service.active)
        finally:
            service.stop()


def handback(
    config: ConfigOpt = DEFAULT_CONFIG,
    if_stale: Annotated[bool, typer.Option("--if-stale", help="Only when the controller's "
                                           "heartbeat is older than its lease (watchdog).")]
    = False,
    as_json: JsonOpt = False,
) -> None:
    """Release every job the controller holds (and nothing else), so Slurm schedules alone."""
    with errors():
        cfg, _ = load_controller(config)
        if if_stale:
            # The plugin's rule, in whole seconds as it reads the clock: the watchdog must
            # not call the controller dead while the plugin still holds new jobs.
            now = int(time.time())
            age = heartbeat_age(cfg.heartbeat, now)
            if heartbeat_fresh(cfg.heartbeat, cfg.lease_seconds, now) and age is not None:
                emit({"released": [], "heartbeat_age": age}, as_json,
                       f"controller alive (heartbeat {age:.0f} s old): nothing to do")
                return
        client, _ = select_backend(cfg.slurm_conf, cfg.backend)
        ids = release_held(client, cfg.partitions)
        emit({"released": ids}, as_json, f"released {len(ids)} job(s): "
               + ",".join(map(str, ids)))


def _timings(config: Path, stores: list[Path]) -> list[Timings]:
    """The timings of each ``--store`` given, else of the config's store. A missing store
    is an error: opening it would create an empty one."""
    if not stores:
        return [store_of(config)[1].timings()]
    for path in stores:
        if not path.exists():
            raise ConfigError(f"no store at {path}")
    return [open_store(str(path)).timings() for path in stores]


def calibrate(
    config: ConfigOpt = DEFAULT_CONFIG,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write the simulation table here, for `simulate "
        "--calibration`.")] = None,
    stores: Annotated[list[Path] | None, typer.Option(
        "--store", metavar="<path>", help="A controller's store (its state.db) instead of "
        "the config's; "
        "repeat it to calibrate once from several runs pooled.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Measure round length, start latency and restart cost for the simulator.

    From what the controller recorded on this cluster: nothing is submitted.
    """
    with errors():
        cal = measure(*_timings(config, stores or []))
        sim = cal.simulation()
        if not sim:
            raise ConfigError("the store has no round that released a job yet: let `blox-slurm "
                              "run` (not --dry-run) schedule some jobs first")
        if out is not None:
            out.write_text(cal.to_toml())
        t = Table(title=f"calibration from {cal.rounds} round(s)")
        for col in ("figure", "n", "median s", "p90 s"):
            t.add_column(col, justify="right" if col != "figure" else "left")
        for name, values in (("round period", None), ("first start", cal.first_starts),
                             ("restart", cal.restarts), ("start after a stop", cal.after_stops),
                             ("start others stopped for", cal.handovers),
                             ("restart after a stop", cal.restarts_after_stops),
                             ("restart others stopped for", cal.restart_handovers)):
            if values is None:
                t.add_row(name, str(cal.rounds), _seconds(cal.round_period), "")
            else:
                t.add_row(name, str(len(values)), _seconds(_quantile(values, 50)),
                          _seconds(_quantile(values, 90)))
        data = {"simulation": sim, "samples": cal.samples(), "rounds": cal.rounds,
                "round_seconds": cal.round_seconds,
                "first_starts": cal.first_starts, "restarts": cal.restarts,
                "after_stops": cal.after_stops, "handovers": cal.handovers,
                "restarts_after_stops": cal.restarts_after_stops,
                "restart_handovers": cal.restart_handovers}
        params = ", ".join(f"{k} = {v:g}" for k, v in sim.items())
        emit(data, as_json, Group(t, Text(f"simulation: {params}"
                                            + (f"\nwritten to {out}" if out else ""))))


def _quantile(values: tuple[float, ...], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
