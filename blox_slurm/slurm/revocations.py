"""When each requeued job's last credential had been revoked, at the latest: what lets the
controller restart it with ``StartTime=now`` rather than ``now+2``.

slurmd refuses a credential made in the second it revoked the job's last one, or earlier
(see :data:`~blox_slurm.slurm.client.REVOKE_MARGIN`), and slurmctld dates that revocation
when it ends the run (the kill it sends carries its time). So a restart may begin at once
once :data:`REVOKE_MARGIN` seconds have passed since any moment known to come after it:

* this controller's own stop, recorded once Slurm has taken it (the ``requeuehold`` came
  back, or the signalled job was seen to have ended);
* the first look at the job pending with that restart count: Slurm shows a requeued job
  pending only after it ended the run.

Each time is kept with the restart count it is about. A later requeue (its owner's, an
admin's, Slurm's after a failed launch) raises the count, and the old time then proves
nothing: the job waits for ``now+2`` again until a round has seen it pending.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .client import SlurmJob


class Revocations:
    """Per job: (restart count, a time by which that count's last run was revoked)."""

    def __init__(self) -> None:
        self._by_job: dict[int, tuple[int, float]] = {}

    def stopped(self, jobs: Iterable[SlurmJob], at: float) -> None:
        """``jobs`` (their records from before the stop) were stopped by ``at``: requeued,
        each now counts one restart more."""
        for j in jobs:
            self._by_job[j.job_id] = (j.restart_cnt + 1, at)

    def observe(self, jobs: Mapping[int, SlurmJob], now: float) -> None:
        """A round's look at the queue at ``now``: keeps the times still about the jobs'
        current restart counts, dates the requeued jobs seen pending for the first time
        with theirs, and forgets jobs gone from ``jobs``."""
        kept: dict[int, tuple[int, float]] = {}
        for job_id, j in jobs.items():
            known = self._by_job.get(job_id)
            if known is not None and known[0] == j.restart_cnt:
                kept[job_id] = known
            elif j.pending and j.restart_cnt > 0:
                kept[job_id] = (j.restart_cnt, now)
        self._by_job = kept

    def times(self) -> dict[int, float]:
        """Job -> a time by which its last run's credential had been revoked."""
        return {job_id: t for job_id, (_, t) in self._by_job.items()}
