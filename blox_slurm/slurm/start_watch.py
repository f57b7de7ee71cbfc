"""Jobs Slurm will not start, set aside so they cannot idle the GPUs the policy gives them.

The policy ranks every waiting job it is shown. A job at the head of the queue that Slurm
cannot start (a dependency on a job still running, a ``--begin`` in the future, nodes it
excluded, an association limit) was "started" every round: pinned, released, never running,
while its GPUs sat idle and the next job stayed held (red team F1). So, each round:

* a job whose dependency Slurm shows unfulfilled (or failed) is not runnable: the policy does
  not see it and the plan keeps it held;
* a released job that Slurm says waits for something no freed GPU ends (``Dependency``, a
  ``--begin``'s ``BeginTime``) is set aside at once; one *we* released (``released``) still
  waiting after ``timeout`` seconds for any other reason (nodes it excluded, a QOS or
  association limit, CPUs or memory that do not fit) too, and so is one Slurm refused to pin
  or release (``refused``): the plan holds it again and its GPUs go to the next job, for ``backoff``
  seconds, doubling each time it happens again (up to an hour), or until Slurm's eligible
  time for a ``--begin`` (a requeued job's ``BeginTime`` is Slurm's requeue delay, which the
  plan lifts: it only gets the timeout);
* why is what ``status`` and ``explain`` show for the job.

This is the controller's memory, not the store's: a restarted controller gives every job a
fresh chance, which costs at most one more ``timeout`` of idle GPUs per job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .client import SlurmJob

#: Reasons a released job waits that no freed GPU ends: set aside at once. Every other reason
#: gets the timeout: 26.05 shows ``ReqNodeNotAvail`` for seconds after a pin to a node still
#: completing its last job, and a QOS or association limit lifts when the user's jobs end.
NOT_BY_RESOURCES = frozenset({"Dependency", "BeginTime"})
MAX_BACKOFF = 3600.0


def unfulfilled_dependency(job: SlurmJob) -> bool:
    """Slurm marks each part of a dependency ``(unfulfilled)`` until it holds and ``(failed)``
    when it never can; a fulfilled part disappears."""
    return "(unfulfilled)" in job.dependency or "(failed)" in job.dependency


@dataclass
class StartWatch:
    timeout: float
    backoff: float
    _released: dict[int, float] = field(default_factory=dict)  # job -> we released it at
    _aside: dict[int, tuple[float, str]] = field(default_factory=dict)  # job -> until, why
    _strikes: dict[int, int] = field(default_factory=dict)

    def update(self, jobs: Mapping[int, SlurmJob], now: float) -> dict[int, str]:
        """The managed jobs to keep from the policy this round, each with why."""
        for gone in (set(self._released) | set(self._aside) | set(self._strikes)) - set(jobs):
            self._forget(gone)
        out: dict[int, str] = {}
        for job_id, job in jobs.items():
            if not job.pending:
                self._forget(job_id)
            elif unfulfilled_dependency(job):
                self._released.pop(job_id, None)
                out[job_id] = f"not runnable: waits for its dependency {job.dependency}"
            elif (aside := self._aside.get(job_id)) is not None and aside[0] > now:
                out[job_id] = aside[1]
            elif job.held:
                self._released.pop(job_id, None)
            elif (why := self._stuck(job, now)) is not None:
                begin = job.eligible_time if job.reason == "BeginTime" else None
                out[job_id] = self._set_aside(job_id, now, why, begin)
        return out

    def released(self, ids: Iterable[int], now: float) -> None:
        """The round released or re-pinned these jobs: their timeout runs from the first."""
        for job_id in ids:
            self._released.setdefault(job_id, now)

    def refused(self, errors: Mapping[int, str], now: float) -> None:
        """Slurm refused to pin or release these jobs where the policy put them (the owner's
        exclusions, a shape the nodes cannot hold): held, they would be chosen again every
        round, so they are set aside like a job that did not start."""
        for job_id, error in errors.items():
            self._set_aside(job_id, now, f"Slurm refused to start it there ({error[:120]})")

    def _stuck(self, job: SlurmJob, now: float) -> str | None:
        # A requeued job's BeginTime is Slurm's requeue delay, which the plan lifts.
        requeue_delay = job.reason == "BeginTime" and job.restart_cnt > 0
        if job.reason in NOT_BY_RESOURCES and not requeue_delay:
            return f"Slurm would not start it ({job.reason})"
        since = self._released.get(job.job_id)  # only jobs we released are timed
        if since is not None and now - since >= self.timeout:
            return f"Slurm did not start it within {self.timeout:g} s ({job.reason})"
        return None

    def _set_aside(self, job_id: int, now: float, why: str,
                   not_before: float | None = None) -> str:
        strikes = self._strikes.get(job_id, 0) + 1
        self._strikes[job_id] = strikes
        until = now + min(MAX_BACKOFF, self.backoff * 2 ** (strikes - 1))
        if not_before is not None:
            until = max(until, not_before)
        text = f"set aside for {until - now:.0f} s: {why}; its GPUs went to the next job"
        self._aside[job_id] = (until, text)
        self._released.pop(job_id, None)
        return text

    def _forget(self, job_id: int) -> None:
        self._released.pop(job_id, None)
        self._aside.pop(job_id, None)
        self._strikes.pop(job_id, None)
