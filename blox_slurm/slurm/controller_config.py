"""``controller.toml``: the ``[controller]`` table plus a composition (inline or by name).

    [controller]
    partitions = ["blox"]
    round_seconds = 30
    store = "/var/lib/blox-slurm/state.db"
    heartbeat = "/var/lib/blox-slurm/heartbeat"
    composition = "tiresias"        # or put [scheduling]/[placement]/... in this file

    [controller.throughput]         # optional: GPU types' speeds, for Gavel
    type_speed = {v100 = 1.0, k80 = 0.3}

Validated strictly (unknown keys are errors), so a typo never silently changes behaviour.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..core import registry
from ..core.composition import Composition, CompositionError
from ..core.tomlfile import read_toml
from ..loading import build, load
from ..workloads.throughput_spec import ThroughputSpec


class ControllerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    partitions: list[str] = Field(default_factory=lambda: ["blox"], min_length=1)
    # finite and bounded: an infinite lease never goes stale (no fail-open), and a huge round
    # overflows Event.wait in the daemon loop
    round_seconds: float = Field(default=30.0, gt=0, le=86400, allow_inf_nan=False)
    # A moved job (another GPU type, a victim restarted elsewhere) that Slurm did not show
    # pending within grace_seconds of its requeue is left held: the next round, this many
    # seconds later instead of round_seconds, places it. 0: wait a whole round.
    followup_seconds: float = Field(default=3.0, ge=0, le=86400, allow_inf_nan=False)
    dry_run: bool = False
    store: str = "/var/lib/blox-slurm/state.db"
    heartbeat: str = "/var/lib/blox-slurm/heartbeat"
    # What `blox-slurm queue` shows users (rank, why waiting), rewritten after every round;
    # world-readable, unlike the store. "": not written.
    queue_file: str = "/var/lib/blox-slurm/queue.json"
    lease_seconds: float = Field(default=90.0, gt=0, le=86400, allow_inf_nan=False)
    handback_on_exit: bool = False
    # Preemption is `scontrol requeuehold`: Slurm sends SIGTERM, waits KillWait, then SIGKILL,
    # and requeues the job held however it exits. A checkpoint signal sent first is opt-in:
    # a job that does not handle it (or has not installed its handler yet) dies of it and is
    # NOT requeued, unless slurm.conf has RequeueExitHold for the code it exits with.
    checkpoint_signal: str | None = None
    grace_seconds: float = Field(default=10.0, ge=0, le=86400, allow_inf_nan=False)
    require_mark: bool = True  # act only on jobs the job-submit plugin marked managed
    # A released job Slurm has not started within start_timeout seconds is held again and
    # kept from the policy for unstartable_backoff seconds (doubling); see start_watch.py.
    start_timeout: float = Field(default=60.0, gt=0, le=86400, allow_inf_nan=False)
    unstartable_backoff: float = Field(default=300.0, gt=0, le=86400, allow_inf_nan=False)
    # Tasks of one job array split off and waiting at a time (each is a job record in
    # slurmctld, counted against MaxJobCount); see blox_slurm/slurm/arrays.py.
    array_window: int = Field(default=64, ge=1, le=100000)
    # The plugin's blox_job_submit.conf, checked against partitions and heartbeat at start and
    # every round (see blox_slurm.slurm.preflight). None: beside slurm.conf. "": no check (only
    # where the controller's host cannot read the file; a mismatch then holds jobs for ever).
    plugin_config: str | None = None
    slurm_conf: str | None = None
    backend: Literal["auto", "cli", "pyslurm"] = "auto"
    composition: str | None = None
    policy_paths: list[str] = Field(default_factory=list)  # files registering extra policies
    telemetry_listen: str | None = None  # "127.0.0.1:9300": agents' endpoint + /metrics
    telemetry_token_file: str | None = None
    # Samples handed to policies each round: at least the longest window a policy looks at
    # (telemetry_guard's idle_window defaults to 1800 s).
    telemetry_window: float = Field(default=1800.0, gt=0, allow_inf_nan=False)
    telemetry_retention: float = Field(default=86400.0, gt=0, allow_inf_nan=False)
    # Half-life of the per-user usage fair-share policies see (the store's ended runs).
    usage_half_life: float = Field(default=7 * 86400.0, gt=0, allow_inf_nan=False)
    # How fast jobs run per GPU type ([controller.throughput]): what Gavel and Optimus weigh.
    throughput: ThroughputSpec = Field(default_factory=ThroughputSpec)

    @field_validator("partitions")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for p in v:
            if not p or not p.replace("-", "").replace("_", "").isalnum():
                raise ValueError(f"bad partition name {p!r}")
        return v


class ConfigError(ValueError):
    """A controller config that cannot be used; the message says what to change."""


def load_config(path: str | Path) -> tuple[ControllerConfig, Composition]:
    p = Path(path)
    data = read_toml(p, ConfigError, "controller config")
    try:
        cfg = ControllerConfig.model_validate(data.get("controller", {}))
    except ValidationError as exc:
        lines = [f"{p}: [controller]"]
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"]) or "(table)"
            lines.append(f"  {loc}: {err['msg']}")
        raise ConfigError("\n".join(lines)) from None
    try:
        cfg.throughput.build()  # a missing or malformed table fails here, not in round 1
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{p}: [controller.throughput]: {exc}") from None
    try:
        for policy_file in cfg.policy_paths:
            registry.load_policy_file(policy_file)
        if "scheduling" in data:
            if cfg.composition:
                raise CompositionError("give either composition = ... or a [scheduling] "
                                       "section, not both")
            comp = build(data, name=data.get("name") or p.stem)
        elif cfg.composition:
            comp = load(cfg.composition)
        else:
            raise CompositionError("no composition: set composition = \"<name or path>\" in "
                                   "[controller] or add a [scheduling] section")
    except (CompositionError, registry.PolicyError) as exc:
        raise ConfigError(f"{p}: {exc}") from None
    return cfg, comp
