"""What a simulation keeps of its run: a record per finished job, the utilization timeline and
the composition's choices (the synthesizer's evaluations).

Kept apart from the world (which only knows the present) so the event loop can stop at any
point and still say what happened, and so a fork that records nothing costs nothing more.
"""

from __future__ import annotations

from ..core.model import Job
from ..core.records import maker
from .records import Choice, JobRecord

#: ``JobRecord(**fields)`` without the frozen ``__init__``'s ``object.__setattr__`` per
#: field (see :mod:`blox_slurm.core.records`): one for every finished job.
_make_record = maker(JobRecord)


class Recorder:
    """Finished jobs, in completion order, and ``(time, busy GPUs)`` steps."""

    def __init__(self, measured: frozenset[int] | None) -> None:
        self.measured = measured
        self.records: list[JobRecord] = []
        self.utilization: list[tuple[float, int]] = [(0.0, 0)]
        self.done_goal = 0  # finished jobs that count towards the goal (measured ones, or all)
        # One int object per busy count: each point would otherwise hold its own (above 256),
        # 32 bytes of the ~100 a point costs; a million-job run keeps ~1.2 million points.
        self._counts: dict[int, int] = {}
        self.choices: list[Choice] = []

    def busy(self, at: float, gpus: int) -> None:
        """``gpus`` are busy from ``at`` (a later value at the same instant replaces it)."""
        util = self.utilization
        gpus = self._counts.setdefault(gpus, gpus)
        if util[-1][0] == at:
            util[-1] = (at, gpus)
        else:
            util.append((at, gpus))

    def chose(self, at: float, composition: str, state: tuple[tuple[str, float], ...]) -> None:
        """The round at ``at`` set composition state (see :class:`Choice`)."""
        self.choices.append(Choice(at, composition, state))

    def finished(self, job: Job, at: float) -> None:
        self.records.append(_make_record(
            id=job.id, submit_time=job.submit_time, num_gpus=job.num_gpus,
            duration=job.duration or 0.0,
            first_start=job.first_start if job.first_start is not None else at, finish=at,
            preemptions=job.preemptions, gpu_seconds=job.attained_service(at),
            model=job.model, user=job.user))
        if self.measured is None or job.id in self.measured:
            self.done_goal += 1
