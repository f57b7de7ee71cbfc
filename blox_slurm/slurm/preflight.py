"""What must hold before the controller writes a heartbeat, i.e. before the job-submit plugin
holds jobs on its word: the plugin and the controller name the same partitions and the same
heartbeat file, and those partitions exist in Slurm.

A mismatch is the quiet failure fail-open cannot catch: a controller that manages ``plain``
while the plugin holds jobs in ``blox`` is alive and heartbeating, so nothing fails open and
every job in ``blox`` waits for ever. So these checks run at start-up (a one-line error) and
every round (a failed round, hence no heartbeat: the plugin fails open and the watchdog hands
back), since either file may change under a running controller.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from .client import SlurmNode
from .controller_config import ControllerConfig
from .job_submit import CONFIG_NAME, read_config


def plugin_config_path(cfg: ControllerConfig) -> Path | None:
    """Where the plugin's config is: ``plugin_config``, else beside slurm.conf (where Slurm
    loads ``job_submit.lua`` from); ``None`` when the check is switched off (``""``)."""
    if cfg.plugin_config is not None:
        return Path(cfg.plugin_config) if cfg.plugin_config else None
    conf = cfg.slurm_conf or os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
    return Path(conf).parent / CONFIG_NAME


def plugin_disagreement(cfg: ControllerConfig) -> str | None:
    """Why the plugin, as configured, would hold jobs this controller never releases (or read
    a heartbeat it never writes); ``None`` when they agree. A missing or invalid plugin config
    is compared as the plugin reads it: its defaults."""
    path = plugin_config_path(cfg)
    if path is None:
        return None
    if path.exists() and not os.access(path, os.R_OK):
        return (f"cannot read the job-submit plugin's config {path} to check it against "
                "[controller]: make it readable to the controller's user")
    plugin, error = read_config(path)
    where = str(path)
    if error is not None:
        where += f", invalid ({error}) so the plugin uses its defaults"
    elif not path.exists():
        where += ", missing so the plugin uses its defaults"
    ours, theirs = sorted(set(cfg.partitions)), sorted(set(plugin.managed_partitions))
    if ours != theirs:
        return (f"the job-submit plugin ({where}) holds jobs in {','.join(theirs)} but "
                f"[controller] partitions is {','.join(ours)}: make them the same (or set "
                "plugin_config to the plugin's config file)")
    if os.path.abspath(plugin.heartbeat) != os.path.abspath(cfg.heartbeat):
        return (f"the job-submit plugin ({where}) reads the heartbeat {plugin.heartbeat} but "
                f"[controller] heartbeat is {cfg.heartbeat}: make them the same")
    return None


def missing_partitions(partitions: Sequence[str], nodes: Sequence[SlurmNode]) -> str | None:
    """Which managed partitions Slurm does not know (no node is in them); ``None`` if none."""
    known = {p for n in nodes for p in n.partitions}
    missing = [p for p in partitions if p not in known]
    if not missing:
        return None
    return (f"partition {','.join(missing)} has no nodes in Slurm (known: "
            f"{','.join(sorted(known)) or 'none'}): fix [controller] partitions")
