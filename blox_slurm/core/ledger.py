"""What one round decided, written down as the walk decides it, and read back two ways.

The walk over ranks (:mod:`blox_slurm.core.round`) records *intentions* here instead of keeping
them in loose variables: who starts where, who is stopped and for whom, who is spared after
all, who moves where, who did not fit and with how many GPUs free, behind whom strict order
blocks. :meth:`Ledger.decisions` turns that into the :class:`~blox_slurm.core.model.Decisions`
the worlds apply; :meth:`Ledger.reasons` is the ``explain`` view of the same record, so
explaining a round never changes what the round decides (nor costs it anything).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .model import GpuId, Job, Move, Start, Stop, make_move, make_stop


@dataclass(slots=True)
class Ledger:
    starts: list[Start] = field(default_factory=list)
    # victim -> the higher-ranked job it was stopped for (None: its scheduler did not run
    # it this round, ``Schedule.stop``), in the order they were stopped
    stopped: dict[int, int | None] = field(default_factory=dict)
    forced: tuple[int, ...] = ()  # stopped by the cluster manager before the walk
    moves: dict[int, Move] = field(default_factory=dict)
    unplaced: dict[int, tuple[int, int]] = field(default_factory=dict)  # (wanted, free then)
    blocker: int | None = None  # rank position of the job strict order waits behind

    def out(self, job_id: int) -> bool:
        """Whether ``job_id`` already leaves its GPUs this round (stopped or moved): it is
        no one's victim again."""
        return job_id in self.stopped or job_id in self.moves

    def stop(self, victim: int, for_job: int | None) -> None:
        self.stopped[victim] = for_job

    def spare(self, victim: int) -> None:
        """The job ``victim`` was stopped for found room elsewhere: it keeps running."""
        del self.stopped[victim]

    def restart(self, victim: int, gpus: tuple[GpuId, ...]) -> None:
        """A victim whose GPUs were used restarts at once on ``gpus``: a move."""
        self.moves[victim] = make_move(job_id=victim, gpus=gpus, for_job=self.stopped.pop(victim))

    def move(self, job_id: int, gpus: tuple[GpuId, ...]) -> None:
        """A running job moves to the GPU type its scheduler chose."""
        self.moves[job_id] = make_move(job_id=job_id, gpus=gpus)

    def decisions(self) -> tuple[tuple[Start, ...], tuple[Stop, ...], tuple[Move, ...]]:
        """The starts, stops and moves, for :class:`~blox_slurm.core.model.Decisions`."""
        stops = (*(make_stop(job_id=v, for_job=f) for v, f in self.stopped.items()),
                 *(make_stop(job_id=j) for j in self.forced))
        return tuple(self.starts), stops, tuple(self.moves.values())

    def reasons(self, order: Sequence[Job], wants: Mapping[int, int],
                types: Mapping[int, str], not_admitted: Collection[int],
                admission: str) -> dict[int, str]:
        """Why each job that does not run is waiting, and why each stopped or moved one was.
        ``wants`` is the GPUs the scheduler gave a job where it chose (else its request)."""
        reasons = {j: f"not admitted by {admission}" for j in not_admitted}
        reasons.update(self._waiting(order, wants))
        for victim, for_job in self.stopped.items():
            reasons[victim] = (f"preempted so job {for_job} (ranked higher) can run"
                               if for_job is not None else
                               "stopped by its scheduler: not run this round")
        for job_id in self.forced:
            reasons[job_id] = "preempted by the cluster manager"
        for m in self.moves.values():
            reasons[m.job_id] = self._moved(m, types)
        return reasons

    @staticmethod
    def _moved(m: Move, types: Mapping[int, str]) -> str:
        """Why a running job restarts elsewhere: a victim spared onto GPUs left over, a type
        its scheduler chose, or (an elastic job) the GPU count it chose."""
        if m.for_job is not None:
            return (f"preempted so job {m.for_job} (ranked higher) can run; restarted on GPUs "
                    "left over")
        if m.job_id in types:
            return (f"moved to {types[m.job_id]}, the type its scheduler chose: checkpointed "
                    "and restarted there")
        return (f"resized to {len(m.gpus)} GPU(s), the count its scheduler chose: "
                "checkpointed and restarted on them")

    def _waiting(self, order: Sequence[Job], wants: Mapping[int, int]
                 ) -> Iterable[tuple[int, str]]:
        """Pending jobs of the order that did not start: behind a blocker, or did not fit
        (those past the point where the walk stopped had nothing free and nothing to stop)."""
        started = {s.job_id for s in self.starts}
        for pos, job in enumerate(order):
            if job.gpus or job.id in started:
                continue
            if self.blocker is not None and pos > self.blocker:
                yield job.id, f"strict order: waiting behind job {order[self.blocker].id}"
                continue
            want, free = self.unplaced.get(job.id, (wants.get(job.id, job.num_gpus), 0))
            yield job.id, (f"needs {want} GPU(s); {free} free on schedulable nodes and "
                           "preempting lower-ranked jobs would not make it fit")
