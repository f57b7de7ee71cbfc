"""``blox-slurm doctor --config``: the whole deployment checked as the controller will use it.

The controller refuses to start on most of these (preflight), but an admin setting up or
debugging a site wants every problem at once, with what to fix, including the ones that only
show later: a plugin Slurm never loads (jobs are then never held, the controller has nothing
to schedule), a lease shorter than the plugin's ``max_age`` (the watchdog releases jobs the
plugin still holds), a heartbeat gone stale (the plugin fails open), a store nobody can open.
Each check is independent and never raises, like the rest of doctor.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path

from .checks import Check
from .cli_backend import CliBackend
from .client import SlurmError
from .controller_config import ControllerConfig
from .job_submit import heartbeat_age, read_config
from .preflight import missing_partitions, plugin_config_path, plugin_disagreement


def plugin_loaded(cli: CliBackend) -> Check:
    """slurmctld runs job_submit.lua (``JobSubmitPlugins`` includes lua) and finds it."""
    try:
        conf = cli.config()
    except SlurmError as e:
        return Check("plugin", False, f"cannot read slurmctld's config: {e}")
    plugins = [p.strip().removeprefix("job_submit/") for p in
               conf.get("JobSubmitPlugins", "").split(",")]
    if "lua" not in plugins:
        return Check("plugin", False, "slurmctld does not run job_submit.lua: add "
                     "JobSubmitPlugins=lua to slurm.conf and restart slurmctld")
    lua = Path(conf.get("SLURM_CONF", "/etc/slurm/slurm.conf")).parent / "job_submit.lua"
    if not lua.is_file():
        return Check("plugin", False, f"JobSubmitPlugins=lua but no {lua}: copy "
                     "slurm_conf/job_submit.lua there")
    return Check("plugin", True, f"slurmctld runs {lua}")


def plugin_config(cfg: ControllerConfig) -> Check:
    path = plugin_config_path(cfg)
    if path is None:
        return Check("plugin_conf", True, "not checked (plugin_config = \"\")")
    problem = plugin_disagreement(cfg)
    if problem is not None:
        return Check("plugin_conf", False, problem)
    plugin, error = read_config(path)
    if error is not None or not path.exists():
        return Check("plugin_conf", False, f"{path}: {error or 'missing'}; the plugin uses its "
                     "defaults")
    if cfg.lease_seconds < plugin.max_age:
        return Check("plugin_conf", False, f"lease_seconds {cfg.lease_seconds:g} < the plugin's "
                     f"max_age {plugin.max_age}: the watchdog would release jobs the plugin "
                     "still holds; make them equal")
    if cfg.round_seconds * 2 > plugin.max_age:
        return Check("plugin_conf", False, f"round_seconds {cfg.round_seconds:g} is more than half "
                     f"of max_age {plugin.max_age}: one slow round makes the plugin fail open")
    return Check("plugin_conf", True, f"{path} agrees (partitions, heartbeat, max_age "
                 f"{plugin.max_age} s)")


def partitions(cli: CliBackend, cfg: ControllerConfig) -> Check:
    try:
        problem = missing_partitions(cfg.partitions, cli.list_nodes())
    except SlurmError as e:
        return Check("partitions", False, f"cannot list Slurm's nodes: {e}")
    return Check("partitions", problem is None, problem or ",".join(cfg.partitions))


def heartbeat(cfg: ControllerConfig, now: float) -> Check:
    age = heartbeat_age(cfg.heartbeat, now)
    if age is None:
        return Check("heartbeat", False, f"no heartbeat at {cfg.heartbeat}: the controller is "
                     "not running (the plugin fails open: Slurm schedules alone)")
    if abs(age) > cfg.lease_seconds:
        return Check("heartbeat", False, f"{cfg.heartbeat} is {age:.0f} s old (lease "
                     f"{cfg.lease_seconds:g} s): the controller is stuck or gone")
    return Check("heartbeat", True, f"{age:.0f} s old (lease {cfg.lease_seconds:g} s)")


def store(cfg: ControllerConfig, now: float) -> Check:
    if not os.path.exists(cfg.store):
        return Check("store", False, f"no store at {cfg.store}: has `blox-slurm run` started?")
    try:  # read-only: a doctor run as root must not leave root-owned journal files behind
        with contextlib.closing(sqlite3.connect(f"file:{cfg.store}?mode=ro", uri=True)) as db:
            db.row_factory = sqlite3.Row
            row = db.execute("SELECT * FROM rounds ORDER BY id DESC LIMIT 1").fetchone()
    except sqlite3.Error as e:
        return Check("store", False, f"{cfg.store} cannot be read: {e}")
    last = dict(row) if row is not None else None
    if last is None:
        return Check("store", True, f"{cfg.store}: no round yet")
    when = f"round {last['id']} {now - last['started']:.0f} s ago"
    if last["error"]:
        return Check("store", False, f"{cfg.store}: last {when} failed: {last['error'][:200]}")
    return Check("store", True, f"{cfg.store}: last {when}, {last['jobs']} job(s)")


def deployment(cfg: ControllerConfig, cli: CliBackend | None,
               now: float | None = None) -> list[Check]:
    """Every check of the deployment; those that need Slurm only when it answers."""
    now = time.time() if now is None else now
    checks = [plugin_config(cfg), heartbeat(cfg, now), store(cfg, now)]
    if cli is not None:
        checks[:0] = [plugin_loaded(cli), partitions(cli, cfg)]
    return checks
