"""The one workload schema every loader and generator produces.

A :class:`JobSpec` is what is known about a job *before* it runs: when it arrives, how many
GPUs it asks for, and how long it would take alone (``duration``, isolated seconds at its
requested GPU count, consolidated, on the reference GPU type). ``model`` names its entry in a
throughput model (Gavel's job types, or any label); ``user``/``account`` feed fair-share.

A :class:`Workload` is an ordered tuple of specs (by ``submit_time``, then ``id``) plus the
measurement window: Blox measures only jobs 3000-4000 while arrivals continue, so metrics
are computed over ``measure`` while the simulator runs everything.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class WorkloadError(ValueError):
    """A malformed trace or generator parameter; the message names file and line."""


@dataclass(frozen=True, slots=True)
class JobSpec:
    id: int
    submit_time: float
    num_gpus: int
    duration: float
    model: str = ""
    user: str = ""
    account: str = ""
    cpus: int = 0
    memory_mb: int = 0
    # GPU types the job may run on (empty: any): set for a job that makes no progress on
    # some type of the cluster, under ``unrunnable = "restrict"`` (:mod:`.runnable`).
    gpu_types: tuple[str, ...] = ()
    # Nodes the job is bound to (None: spread as placement likes). A Slurm job asking
    # ``--gres=gpu:N`` (per node) without ``-N`` gets exactly one node.
    nodes: int | None = None

    def __post_init__(self) -> None:
        if self.num_gpus < 1:
            raise WorkloadError(f"job {self.id}: num_gpus must be >= 1, got {self.num_gpus}")
        if not self.duration > 0:
            raise WorkloadError(f"job {self.id}: duration must be > 0, got {self.duration}")
        if self.nodes is not None and not 1 <= self.nodes <= self.num_gpus:
            raise WorkloadError(f"job {self.id}: nodes must be 1..num_gpus "
                                f"({self.num_gpus}), got {self.nodes}")
        if not self.submit_time >= 0:
            raise WorkloadError(f"job {self.id}: submit_time must be >= 0, got {self.submit_time}")


@dataclass(frozen=True, slots=True)
class Workload:
    jobs: tuple[JobSpec, ...]
    measure: tuple[int, int] | None = None  # inclusive-exclusive job-id window; None = all
    source: str = ""
    skipped_rows: int = 0
    meta: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ids = [j.id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise WorkloadError(f"{self.source or 'workload'}: duplicate job ids")

    def measured(self, job_id: int) -> bool:
        return self.measure is None or self.measure[0] <= job_id < self.measure[1]
