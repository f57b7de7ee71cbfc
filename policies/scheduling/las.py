from __future__ import annotations

from collections.abc import Sequence

from blox_slurm.core.abstractions import Schedule, SchedulingBase
from blox_slurm.core.model import ClusterSnapshot, Job
from blox_slurm.core.registry import register


@register("scheduling", "las")
class Las(SchedulingBase):
    """Least attained service first (GPU x seconds received), preemptive; ties by arrival."""

    time_dependent = True  # running jobs accumulate service, so waiting ones overtake them
    keyed = True  # a sort by a per-job key: see SchedulingPolicy

    def __init__(self, params: object = None) -> None:
        pass

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        now = snapshot.now
        return Schedule(sorted(jobs, key=lambda j: (j.attained_service(now), j.submit_time, j.id)))
