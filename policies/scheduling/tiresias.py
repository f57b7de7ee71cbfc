from __future__ import annotations

import bisect
from collections.abc import Sequence
from operator import itemgetter

from pydantic import BaseModel, ConfigDict, Field, field_validator

from blox_slurm.core.abstractions import Schedule, SchedulingBase
from blox_slurm.core.model import ClusterSnapshot, Job
from blox_slurm.core.registry import register

RESET = "tiresias.reset"


@register("scheduling", "tiresias")
class Tiresias(SchedulingBase):
    """Tiresias' discretized 2D-LAS: service queues by GPU-seconds, FIFO within a queue,
    starvation promotion (Gu et al., NSDI'19).

    A job sits in queue ``i`` while its attained service (GPUs x seconds, the "2D" of 2D-LAS)
    is in ``[thresholds[i-1], thresholds[i])``; lower queues run first; within a queue jobs are
    served in arrival order, so a long job is not preempted by every newcomer of the same
    queue (plain LAS, which Blox calls Tiresias, preempts on every small difference).

    Starvation: a pending job that has waited since its last start/preemption for at least
    ``promote_knob`` x its executed time (attained service / GPUs) is promoted to the top
    queue (Tiresias' PROMOTE_KNOB rule) and, as in the paper, its service counter is reset:
    the policy asks the world to remember the service at promotion (the ``tiresias.reset``
    mark), and queues are computed from service since then. The promoted job therefore keeps
    the top queue once it runs instead of being preempted straight back. ``promote_knob = 0``
    disables promotion.
    """

    time_dependent = True
    keyed = True  # a sort by a per-job key: see SchedulingPolicy

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        thresholds: list[float] = Field(default_factory=lambda: [3600.0, 36000.0])
        promote_knob: float = Field(default=8.0, ge=0)

        @field_validator("thresholds")
        @classmethod
        def _increasing(cls, v: list[float]) -> list[float]:
            if any(t <= 0 for t in v) or any(b <= a for a, b in zip(v, v[1:], strict=False)):
                raise ValueError("thresholds must be positive and strictly increasing")
            return v

    def __init__(self, params: Params | None = None) -> None:
        p = params or self.Params()
        self.thresholds = list(p.thresholds)
        self.promote_knob = p.promote_knob

    def queue(self, job: Job, now: float) -> int:
        """The job's queue this round (0 = highest priority)."""
        return self._classify(job, now)[0]

    def _classify(self, job: Job, now: float) -> tuple[int, bool]:
        """(queue index, whether the job is being promoted now)."""
        service = job.attained_service(now)
        q = bisect.bisect_right(self.thresholds, service - job.mark(RESET))
        if q and self.promote_knob and not job.running:
            executed = service / job.num_gpus
            if now - job.last_event >= self.promote_knob * executed:
                return 0, True
        return q, False

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        now = snapshot.now
        keyed = []
        marks = []
        for j in jobs:
            q, promoted = self._classify(j, now)
            if promoted:
                marks.append((j.id, RESET, j.attained_service(now)))
            keyed.append(((q, j.submit_time, j.id), j))
        keyed.sort(key=itemgetter(0))
        return Schedule([j for _, j in keyed], marks=tuple(marks))
