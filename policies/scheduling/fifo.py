from __future__ import annotations

import operator
from collections.abc import Sequence

from blox_slurm.core.abstractions import Schedule, SchedulingBase
from blox_slurm.core.model import ClusterSnapshot, Job
from blox_slurm.core.registry import register

arrival_key = operator.attrgetter("submit_time", "id")
"""Arrival order, ties broken by job id: the tie-break every built-in policy shares."""

_by_id, _by_submit = operator.attrgetter("id"), operator.attrgetter("submit_time")


@register("scheduling", "fifo")
class Fifo(SchedulingBase):
    """First in, first out by submit time (ties by job id); never reorders running jobs."""

    time_dependent = False
    keyed = True  # a sort by a per-job key: see SchedulingPolicy

    def __init__(self, params: object = None) -> None:
        pass

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        # Same order as key=arrival_key; two stable sorts on scalar keys avoid building a
        # tuple per job, which is most of a round's cost with hundreds of running jobs.
        return Schedule(sorted(sorted(jobs, key=_by_id), key=_by_submit))
