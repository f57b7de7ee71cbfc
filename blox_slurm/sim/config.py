"""Simulator settings and cluster shapes, validated at the boundary (TOML / CLI)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..core.model import Gpu, Node, build_cluster

_GROUP = re.compile(r"^(?P<type>[A-Za-z0-9_.-]+):(?P<per>\d+)x(?P<nodes>\d+)$")


class SimConfig(BaseModel):
    """``[simulation]`` in a composition file, or CLI options.

    ``restart_cost``: seconds a preempted job spends restoring its checkpoint after it is
    restarted (GPUs held, no progress). ``start_latency``: seconds from the round that starts a
    job to Slurm running it, on every start (GPUs held, no service, no progress): the round's
    own time and the batch scheduler's pass after the controller releases the job; 0 in the
    ideal world of published simulators, measured on a cluster by ``blox-slurm calibrate``.
    ``restart_latency``: seconds a restart (of a job preempted before, a moved one too) takes
    beyond ``start_latency`` before it runs (GPUs held, no service, no progress): on Slurm
    the requeue delay the controller lifts to ``now+2`` and the scheduling pass after it.
    Slurm's StartTime, the service the controller counts and the time Gavel counts on a
    type all begin after it; charged in ``restart_cost`` instead, the simulator counted
    that wait as received service. ``calibrate`` measures it.
    ``launch_cost``: seconds from then to the job's first progress on every start (process
    start-up, framework initialisation: GPUs held, service counted, no progress), which only
    the job knows. ``stop_latency``: seconds from the round that stops a job until its GPUs
    are free for another job and it can be started again (on Slurm, the requeued job
    completing: its signal handling, the epilog); a start waiting for them begins that much
    later. ``calibrate`` measures it.
    ``handover_latency``: seconds from the round that stops jobs for a waiting one
    (``Stop.for_job``) to Slurm running that job, in place of the stop wait plus
    ``start_latency`` (at least the stop wait still): on Slurm the stopped jobs' completion
    sets off a scheduling pass at once, so such a start is often quicker than a plain
    release, which waits for the batch scheduler's next pass. ``calibrate`` measures it from
    the same starts; ``None`` (the default) keeps the sum.
    ``stop_delay``: seconds a stopped job runs on after the round that stops it (the round's
    apply and Slurm's requeue), its service and progress counted, as the controller's store
    counts them to the end of the stopped run; ``calibrate`` measures it. Even a tenth of a
    second matters at short rounds: without it two LAS jobs stopped and started in turn
    tie on service exactly, and the simulator swapped them every round (1.5x Slurm's
    preemptions), not Slurm.
    ``start_latency_samples`` and ``restart_latency_samples``: Slurm's latencies as
    ``calibrate`` measured them (a first start's, and a restart's whole latency from its
    round); when given, each start draws its own from them in place of ``start_latency``
    (and of ``start_latency + restart_latency`` for a restart), seeded by ``latency_seed``,
    since Slurm's vary by whole seconds from one start to the next (see
    :mod:`blox_slurm.sim.latency`); ``stop_delay_samples`` likewise for ``stop_delay``. The
    medians above still serve where no samples are given.
    ``batch_sched_delay``: Slurm's own setting (3 s by default); when set, a first start
    begins at the StartTime Slurm's batch scheduler gives it, its passes spaced this many
    whole seconds and set off by arrivals, job ends, stops and releases
    (:mod:`blox_slurm.sim.passes`), in place of ``start_latency`` or a drawn sample.
    ``sched_tick_phase`` and ``slurm_second_phase`` place those passes on the simulator's
    clock: slurmctld looks for a pass at ``sched_tick_phase + k`` seconds, and Slurm's whole
    seconds begin at ``slurm_second_phase + k``; a recorded run gives both
    (``blox-slurm demo``), a trace has no phase to keep (0 is as good as any).
    ``quantize_to_rounds``: Blox's accounting, where a job ends at the end of the round in
    which it finishes instead of at its exact time.
    ``stop_when_measured``: end the run once every job in the workload's measurement window has
    finished (Blox's methodology: later arrivals only provide load).
    ``responsiveness``: what a job's time to first start counts up to: ``"start"`` (the round
    that started it) or ``"blox"``, Blox's own figure, which counts a job as started when its
    first round ends, one round later for every job.
    ``rates``: how a placement turns into speed: ``"placement"`` (the physical world: a job
    spread over nodes runs at the throughput model's spread rate) or ``"consolidated"``
    (Gavel's simulator: every job at its consolidated rate wherever it runs).
    ``clock``: when rounds happen: ``"ticks"``, every ``round_duration`` seconds (Blox's
    simulator, and a controller on a cluster), or ``"gavel"``, as Gavel's simulator moves its
    clock: a round ends when the last job it runs ends, if that comes sooner; when nothing
    runs, the next round is the next arrival (even with jobs waiting: in Gavel they wait for
    the allocation's next reset); the first round is the first arrival.
    ``steps``: ``"continuous"`` (a job progresses at its rate) or ``"whole"``, as Gavel's
    simulator runs a job that its throughput table measures: ``int(steps/s x round)`` whole
    steps per round, a fraction of a step under its rate, so a long job can end a round later.
    ``usage_half_life``: seconds after which a finished run's GPU-seconds count half in the
    per-user/account usage the simulator hands to fair-share policies (default 7 days).
    """

    model_config = ConfigDict(extra="forbid")
    round_duration: float = Field(default=300.0, gt=0)
    quantize_to_rounds: bool = False
    restart_cost: float = Field(default=30.0, ge=0)
    start_latency: float = Field(default=0.0, ge=0)
    restart_latency: float = Field(default=0.0, ge=0)
    launch_cost: float = Field(default=0.0, ge=0)
    stop_latency: float = Field(default=0.0, ge=0)
    handover_latency: float | None = Field(default=None, ge=0)
    start_latency_samples: tuple[Annotated[float, Field(ge=0)], ...] = ()
    restart_latency_samples: tuple[Annotated[float, Field(ge=0)], ...] = ()
    stop_delay: float = Field(default=0.0, ge=0)
    stop_delay_samples: tuple[Annotated[float, Field(ge=0)], ...] = ()
    latency_seed: int = 0
    batch_sched_delay: float | None = Field(default=None, gt=0)
    sched_tick_phase: float = Field(default=0.0, ge=0, lt=1)
    slurm_second_phase: float = Field(default=0.0, ge=0, lt=1)
    max_time: float | None = Field(default=None, gt=0)
    stop_when_measured: bool = True
    usage_half_life: float = Field(default=7 * 86400.0, gt=0)
    responsiveness: Literal["start", "blox"] = "start"
    rates: Literal["placement", "consolidated"] = "placement"
    clock: Literal["ticks", "gavel"] = "ticks"
    steps: Literal["continuous", "whole"] = "continuous"


# The worlds of the published simulators, as [simulation] settings: what ``--mode`` sets
# over a composition's own table. ``physical`` is the default world spelled out.
MODES: dict[str, dict[str, object]] = {
    "physical": {"round_duration": 300.0, "quantize_to_rounds": False,
                 "responsiveness": "start", "restart_cost": 30.0, "rates": "placement",
                 "clock": "ticks", "steps": "continuous"},
    # Blox: jobs end at the end of their last round, a start counts when its round ends, and
    # a restart is free.
    "blox": {"round_duration": 300.0, "quantize_to_rounds": True, "responsiveness": "blox",
             "restart_cost": 0.0, "rates": "placement", "clock": "ticks",
             "steps": "continuous"},
    # Gavel: 360 s rounds on Gavel's clock, consolidated rates whatever the placement, whole
    # steps per round, a restart is free.
    "gavel": {"round_duration": 360.0, "quantize_to_rounds": False, "responsiveness": "start",
              "restart_cost": 0.0, "rates": "consolidated", "clock": "gavel",
              "steps": "whole"},
}


class ClusterSpec(BaseModel):
    """GPU node groups as ``[(gpu_type, gpus_per_node, nodes), ...]``."""

    model_config = ConfigDict(extra="forbid")
    groups: list[tuple[str, int, int]] = Field(default_factory=lambda: [("gpu", 4, 32)])

    @classmethod
    def parse(cls, text: str) -> ClusterSpec:
        """``"v100:4x36,k80:4x36"``: type, GPUs per node, number of nodes, per group."""
        groups = []
        for part in text.split(","):
            m = _GROUP.match(part.strip())
            if not m or int(m["per"]) < 1 or int(m["nodes"]) < 1:
                raise ValueError(f"bad GPU group {part.strip()!r}: expected TYPE:GPUSxNODES, "
                                 "e.g. v100:4x8")
            groups.append((m["type"], int(m["per"]), int(m["nodes"])))
        return cls(groups=groups)

    @classmethod
    def uniform(cls, nodes: int, gpus_per_node: int, gpu_type: str = "gpu") -> ClusterSpec:
        return cls(groups=[(gpu_type, gpus_per_node, nodes)])

    def build(self) -> tuple[tuple[Node, ...], tuple[Gpu, ...]]:
        return build_cluster([(t, n, per) for t, per, n in self.groups])

    @property
    def total_gpus(self) -> int:
        return sum(per * n for _, per, n in self.groups)

    def __str__(self) -> str:
        return ",".join(f"{t}:{per}x{n}" for t, per, n in self.groups)


def mode_settings(mode: str | None) -> dict[str, object]:
    """The ``[simulation]`` settings of ``--mode`` (none without one); an unknown mode is
    an error naming the known ones."""
    if mode is None:
        return {}
    if mode not in MODES:
        raise ValueError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    return dict(MODES[mode])
