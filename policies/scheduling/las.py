from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from blox_slurm.core.abstractions import Schedule, SchedulingBase
from blox_slurm.core.model import ClusterSnapshot, Job
from blox_slurm.core.registry import register

# From this many jobs the sort runs in numpy: the simulator ranks every active job (a
# thousand on a busy 1,024-GPU cluster) in each round that preempts.
VECTOR_FROM = 64
_fields = {name: attrgetter(name) for name in ("attained_base", "run_since", "gpus",
                                                 "submit_time", "id")}


@register("scheduling", "las")
class Las(SchedulingBase):
    """Least attained service first (GPU x seconds received), preemptive; ties by arrival."""

    time_dependent = True  # running jobs accumulate service, so waiting ones overtake them
    keyed = True  # a sort by a per-job key: see SchedulingPolicy

    def __init__(self, params: object = None) -> None:
        pass

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        now = snapshot.now
        if len(jobs) >= VECTOR_FROM:
            return Schedule(by_service(jobs, now))
        return Schedule(sorted(jobs, key=lambda j: (j.attained_service(now), j.submit_time,
                                                    j.id)))


def by_service(jobs: Sequence[Job], now: float) -> list[Job]:
    """``jobs`` sorted by (attained service at ``now``, submit time, id), the same order as
    the plain sort: the service is :meth:`Job.attained_service`'s arithmetic on float64
    columns (the same IEEE operations, no fused multiply-add), and ids are unique, so there
    are no ties to break differently."""
    import numpy as np

    n = len(jobs)
    base = np.fromiter(map(_fields["attained_base"], jobs), np.float64, n)
    since = np.array(list(map(_fields["run_since"], jobs)), dtype=np.float64)  # None -> NaN
    gpus = np.fromiter(map(len, map(_fields["gpus"], jobs)), np.float64, n)
    service = np.where(np.isnan(since), base, base + gpus * np.maximum(0.0, now - since))
    rank = np.lexsort((np.fromiter(map(_fields["id"], jobs), np.int64, n),
                       np.fromiter(map(_fields["submit_time"], jobs), np.float64, n), service))
    return list(map(jobs.__getitem__, rank.tolist()))
