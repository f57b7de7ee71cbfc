from __future__ import annotations

import math
from collections.abc import Sequence

from blox_slurm.core.abstractions import Schedule, SchedulingBase
from blox_slurm.core.model import ClusterSnapshot, Job
from blox_slurm.core.registry import register


@register("scheduling", "srtf")
class Srtf(SchedulingBase):
    """Shortest remaining time first, from the oracle duration; jobs without one go last."""

    # A running job's remaining time only shrinks and a waiting job's is fixed, so the order
    # between them cannot flip with time alone: decisions change only on arrivals/completions.
    time_dependent = False
    keyed = True  # a sort by a per-job key: see SchedulingPolicy

    def __init__(self, params: object = None) -> None:
        pass

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        now = snapshot.now

        def key(j: Job) -> tuple[float, float, int]:
            r = j.remaining(now)
            return (math.inf if r is None else r, j.submit_time, j.id)

        return Schedule(sorted(jobs, key=key))
