"""Job arrays in managed partitions: every task is scheduled as a job of its own.

Slurm lists an array's pending tasks as one record (``123_[0-31]``) until something touches a
task on its own; releasing that record let Slurm start every task it found room for, past
the policy (red team F5). So the controller *splits* tasks off before the policy sees them:
``scontrol hold 123_[4-7]`` (they are held already) gives each of those tasks its own job
record and id, held, which the policy then ranks, places and starts like any job. The
unsplit rest is never shown to the policy and never acted on.

* **A window, not the whole array**: at most ``window`` tasks of an array wait split at a
  time. Every split task is a job record in slurmctld, and a site's ``MaxJobCount`` (10000
  by default) is shared by everyone: ten 1000-task arrays split at once would refuse every
  other submission. Tasks of one array are alike, so the policy loses nothing by seeing the
  next few only.
* **The last task is never split**: a hold naming every pending task is a hold of the whole
  array (no split); the array's own record becomes its last task once the others are gone.
* **The throttle** (``--array=0-31%4``) is Slurm's: a fifth task released would wait with
  ``JobArrayTaskLimit`` while its GPUs idle, so tasks past it are not runnable.
* **Task order**: tasks of an array share a submit time, so policies break the tie by job
  id, and split tasks get increasing ids in task order. The array's own record (its last
  task, with the array's smaller id) would jump ahead of them, and the policy would swap a
  task it had just released for it; it waits until it is the array's only waiting task.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .client import SlurmJob

_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")
log = logging.getLogger(__name__)
#: Slurm's own MaxArraySize ceiling: a pending list longer than this is not Slurm's.
MAX_TASKS = 4_000_001


@dataclass(frozen=True, slots=True)
class Split:
    """Pending tasks of one array to give their own job records."""

    array_job_id: int
    tasks: tuple[int, ...]


def task_ids(expr: str) -> list[int]:
    """The task ids of Slurm's pending-task list: ``0-7``, ``1,3,5-9:2`` (a throttle after
    ``%`` is dropped). ``ValueError`` on anything else."""
    out: list[int] = []
    for part in expr.split("%", 1)[0].split(","):
        m = _RANGE.match(part.strip())
        if m is None:
            raise ValueError(f"bad array task list {expr!r}")
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) else first
        step = int(m.group(3)) if m.group(3) else 1
        if last < first or step < 1 or len(out) + (last - first) // step >= MAX_TASKS:
            raise ValueError(f"bad array task list {expr!r}")
        out.extend(range(first, last + 1, step))
    return sorted(set(out))


def bracket(tasks: Sequence[int]) -> str:
    """``[0-3,5]``: tasks as ranges, the form ``scontrol`` takes after ``A_``."""
    parts: list[str] = []
    ordered = sorted(set(tasks))
    start = prev = ordered[0]
    for t in [*ordered[1:], None]:
        if t is not None and t == prev + 1:
            prev = t
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if t is not None:
            start = prev = t
    return "[" + ",".join(parts) + "]"


def splits(jobs: Iterable[SlurmJob], window: int) -> list[Split]:
    """What to split this round: for each held unsplit array record, the lowest pending
    tasks that bring the array's split-and-waiting tasks up to ``window``, never its last
    one. Records that are not held (an array submitted while the cluster failed open) are
    Slurm's to run."""
    jobs = list(jobs)
    waiting = Counter(j.array_job_id for j in jobs
                      if j.array_job_id and j.pending and not j.unsplit_array)
    out = []
    for j in jobs:
        if not (j.unsplit_array and j.pending and j.held):
            continue
        try:
            pending = task_ids(j.array_tasks)
        except ValueError:  # not Slurm's full list: left held and unsplit, and said
            log.warning("array %d: cannot read its pending tasks %r; not split",
                        j.array_job_id, j.array_tasks)
            continue
        tasks = pending[:-1][:max(0, window - waiting[j.array_job_id])]
        if tasks:
            out.append(Split(j.array_job_id, tuple(tasks)))
    return out


def held_back(jobs: Mapping[int, SlurmJob]) -> dict[int, str]:
    """Pending array tasks the policy must not start yet, with why: those past their array's
    throttle, and the array's own record while other tasks of its array wait."""
    waiting = Counter(j.array_job_id for j in jobs.values() if j.array_job_id and j.pending)
    out = {j.job_id: "not runnable: waits for the tasks of its array before it"
           for j in jobs.values()
           if j.pending and j.job_id == j.array_job_id and waiting[j.array_job_id] > 1}
    return {**out, **_over_throttle(jobs)}


def _over_throttle(jobs: Mapping[int, SlurmJob]) -> dict[int, str]:
    """With ``%N`` and ``r`` tasks running, only ``N - r`` waiting tasks may start: those
    already released first (Slurm may be starting them), then in task order."""
    running = Counter(j.array_job_id for j in jobs.values() if j.array_job_id and j.in_run)
    budget: dict[int, int] = {}
    out: dict[int, str] = {}
    tasks = sorted((j for j in jobs.values()
                    if j.array_max_tasks and j.pending and not j.unsplit_array),
                   key=lambda j: (j.array_job_id, j.held, j.array_task_id or 0))
    for j in tasks:
        left = budget.setdefault(j.array_job_id, j.array_max_tasks - running[j.array_job_id])
        budget[j.array_job_id] = left - 1
        if left <= 0:
            out[j.job_id] = (f"not runnable: its array may run {j.array_max_tasks} at once "
                             f"(--array=...%{j.array_max_tasks})")
    return out
