"""``blox-slurm run | status | explain | report | handback | calibrate``: the admin's side
of the CLI.

Exit codes: 0 success; 1 Slurm unreachable or a runtime failure; 2 bad input (config, job id).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import threading
import time
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..cli_errors import exit_codes
from .backends import select_backend
from .calibrate import calibrate as measure
from .client import SlurmError
from .controller import Controller, RoundReport
from .controller import handback as release_held
from .controller_config import ConfigError, ControllerConfig, load_config
from .job_submit import heartbeat_age, heartbeat_fresh
from .store import Store, StoreGone

ConfigOpt = Annotated[Path, typer.Option("--config", "-c", help="controller.toml")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
err = Console(stderr=True)


def _errors() -> AbstractContextManager[None]:
    return exit_codes((ConfigError, ValueError), (SlurmError, StoreGone))


def _store(config: Path) -> tuple[ControllerConfig, Store]:
    cfg, _ = load_config(config)
    if not Path(cfg.store).exists():
        raise ConfigError(f"no store at {cfg.store}: has `blox-slurm run` been started?")
    return cfg, _open_store(cfg.store)


def _open_store(path: str) -> Store:
    try:
        return Store(path)
    except (OSError, sqlite3.Error) as exc:
        raise ConfigError(f"cannot open the store {path} ({exc}): set [controller] store to "
                          "a file in a writable directory") from None


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


def _print(data: Any, as_json: bool, render: Any) -> None:
    if as_json:
        typer.echo(json.dumps(data, indent=1, default=str))
    else:
        Console().print(render)


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


def run(
    config: ConfigOpt,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Shadow mode: decide and record, apply nothing, write no "
        "heartbeat.")] = False,
    rounds: Annotated[int | None, typer.Option(help="Stop after N rounds.")] = None,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Log at INFO and print one line per round.")] = False,
) -> None:
    """Run the controller: every round, observe Slurm, decide with the composition, apply.

    SIGTERM/SIGINT finish the current round, hand back held jobs if configured, exit 0.
    """
    stop = threading.Event()  # handlers first: a SIGTERM during start-up still exits 0
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(message)s")
    with _errors():
        cfg, comp = load_config(config)
        if dry_run:
            cfg = cfg.model_copy(update={"dry_run": True})
        _check_slurm_conf(cfg.slurm_conf or os.environ.get("SLURM_CONF"))
        client, why = select_backend(cfg.slurm_conf, cfg.backend)
        ctl = Controller(cfg, comp, client, _open_store(cfg.store))
        _preflight(ctl)
        receivers: list[Any] = []

        def active() -> None:  # this controller is the active one: serve, then say so
            receivers.append(_telemetry(cfg, ctl))
            err.print(f"{why}; composition {comp.name}; partitions "
                      f"{','.join(cfg.partitions)}{'; DRY RUN' if cfg.dry_run else ''}",
                      highlight=False)

        def show(r: RoundReport) -> None:
            if verbose:
                err.print(f"round {r.round_id}: {r.jobs} jobs ({r.pending} waiting), "
                          f"{len(r.decisions.start) if r.decisions else 0} start, "
                          f"{len(r.plan.preempt) if r.plan else 0} preempt, "
                          f"{r.slurm_calls} Slurm calls, {r.seconds:.2f} s"
                          + (f", error: {r.error}" if r.error else ""), highlight=False)

        try:
            ctl.run(stop, rounds, show, on_active=active)
        finally:
            for receiver in filter(None, receivers):
                receiver.stop()


def status(config: ConfigOpt, as_json: JsonOpt = False) -> None:
    """Managed jobs as the controller last saw them: rank, state, held, GPUs, service."""
    with _errors():
        _, store = _store(config)
        rows = store.jobs()
        last = store.last_round()
        t = Table(title=f"managed jobs (round {last['id'] if last else '-'}"
                        f"{', decided by ' + last['composition'] if last else ''})")
        for col in ("job", "user", "state", "rank", "held", "GPUs", "GPU-h", "preempt",
                    "why"):
            t.add_column(col)
        for r in rows:
            t.add_row(str(r["job_id"]), r["user"], r["state"],
                      "-" if r["rank"] is None else str(r["rank"]),
                      "held" if r["held"] else "released", str(r["num_gpus"]),
                      f"{(r['attained_base'] or 0) / 3600:.2f}", str(r["preemptions"]),
                      r["reason"] or "")
        _print({"round": last, "jobs": rows}, as_json, t)


def explain(
    job_id: Annotated[int, typer.Argument(help="The Slurm job id.")],
    config: ConfigOpt,
    as_json: JsonOpt = False,
) -> None:
    """Why a job waits, was started or was preempted: its record, decisions and actions."""
    with _errors():
        _, store = _store(config)
        job = store.job(job_id)
        if job is None:
            raise ConfigError(f"job {job_id} is not known to the controller (not in a "
                              "managed partition, or not marked by the job-submit plugin)")
        history = store.history(job_id)
        actions = store.actions(job_id)
        if as_json:
            _print({"job": job, "decisions": history, "actions": actions}, True, None)
            return
        c = Console()
        c.print(f"job {job_id} ({job['user']}, {job['num_gpus']} GPU(s)): {job['state']}, "
                f"rank {job['rank']}, {'held' if job['held'] else 'released'}, "
                f"{job['preemptions']} preemption(s), "
                f"{(job['attained_base'] or 0) / 3600:.2f} GPU-hours received")
        if job["reason"]:
            c.print(f"now: {job['reason']}")
        for h in history[:10]:
            when = time.strftime("%H:%M:%S", time.localtime(h["started"]))
            c.print(f"  round {h['round_id']} {when}: {h['kind']}"
                    f"{' (dry-run)' if h['dry_run'] else ''} {h['reason']}")
        for a in actions[:10]:
            c.print(f"  action {a['verb']}: {'ok' if a['ok'] else 'FAILED ' + a['error']}")


def report(config: ConfigOpt, as_json: JsonOpt = False) -> None:
    """Shadow-mode report: when the policy would have started jobs vs when Slurm did."""
    with _errors():
        _, store = _store(config)
        shadow = store.shadow()
        summary = shadow.summary()
        t = Table(title="shadow mode: the policy vs Slurm, every managed job")
        t.add_column("figure")
        t.add_column("value", justify="right")
        for key, label in SHADOW_LABELS.items():
            value = summary[key]
            t.add_row(label, "-" if value is None else f"{value:+.1f} s"
                      if isinstance(value, float) else str(value))
        _print({"summary": summary, "jobs": [{**asdict(j), "case": j.case}
                                             for j in shadow.jobs]}, as_json, t)


SHADOW_LABELS = {
    "jobs": "managed jobs seen",
    "compared": "started by both",
    "policy_earlier": "  policy earlier (by 1 s or more)",
    "policy_later": "  policy later",
    "same_time": "  within a second",
    "median_slurm_minus_policy": "  median Slurm start - policy start",
    "policy_held": "started by Slurm, held by the policy",
    "median_held_seconds_when_slurm_started": "  median time held when Slurm started it",
    "policy_started": "started by the policy only (Slurm not yet)",
    "both_waiting": "waiting for both",
    "unseen": "started by Slurm between two rounds",
    "would_have_preempted": "preemptions the policy would have made",
}


def handback(
    config: ConfigOpt,
    if_stale: Annotated[bool, typer.Option("--if-stale", help="Only when the controller's "
                                           "heartbeat is older than its lease (watchdog).")]
    = False,
    as_json: JsonOpt = False,
) -> None:
    """Release every job the controller holds (and nothing else), so Slurm schedules alone."""
    with _errors():
        cfg, _ = load_config(config)
        if if_stale:
            # The plugin's rule, in whole seconds as it reads the clock: the watchdog must
            # not call the controller dead while the plugin still holds new jobs.
            now = int(time.time())
            age = heartbeat_age(cfg.heartbeat, now)
            if heartbeat_fresh(cfg.heartbeat, cfg.lease_seconds, now) and age is not None:
                _print({"released": [], "heartbeat_age": age}, as_json,
                       f"controller alive (heartbeat {age:.0f} s old): nothing to do")
                return
        client, _ = select_backend(cfg.slurm_conf, cfg.backend)
        ids = release_held(client, cfg.partitions)
        _print({"released": ids}, as_json, f"released {len(ids)} job(s): "
               + ",".join(map(str, ids)))


def calibrate(
    config: ConfigOpt,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write the simulation table here, for `simulate "
        "--calibration`.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Measure round length, start latency and restart cost for the simulator.

    From what the controller recorded on this cluster: nothing is submitted.
    """
    with _errors():
        _, store = _store(config)
        cal = measure(store.timings())
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
                             ("restart", cal.restarts), ("start after a stop", cal.after_stops)):
            if values is None:
                t.add_row(name, str(cal.rounds), _seconds(cal.round_period), "")
            else:
                t.add_row(name, str(len(values)), _seconds(_quantile(values, 50)),
                          _seconds(_quantile(values, 90)))
        data = {"simulation": sim, "rounds": cal.rounds, "round_seconds": cal.round_seconds,
                "first_starts": cal.first_starts, "restarts": cal.restarts,
                "after_stops": cal.after_stops}
        params = ", ".join(f"{k} = {v:g}" for k, v in sim.items())
        _print(data, as_json, Group(t, Text(f"simulation: {params}"
                                            + (f"\nwritten to {out}" if out else ""))))


def _quantile(values: tuple[float, ...], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
