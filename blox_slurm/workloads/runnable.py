"""Trace jobs that make no progress on some GPU type of a cluster, handled by one explicit
choice (``--unrunnable``, a sweep file's ``[trace] unrunnable``).

Gavel measured 0 steps/s for some models on some types (large models on K80s): a
heterogeneity-agnostic scheduler would place such a job there and it would never finish, so
the simulator refuses the placement mid-run. Deciding up front, for the whole trace, keeps
that failure out of a run that has already cost minutes, and makes the choice visible:

* ``error`` (default): stop before the run, naming the first such job and how many there are.
* ``drop``: remove them (the job set Gavel's own simulator ran); the count is reported.
* ``restrict``: keep them, on the types where they progress only (:func:`fit.required_types
  <blox_slurm.core.fit.required_types>` reads the set; placement and Gavel honour it). A job
  that progresses on no type of the cluster, or only on types with fewer GPUs than it asks
  for, would wait forever: it cannot be kept and is an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Literal

from ..core.model import make_job
from ..core.throughput import ThroughputModel
from .schema import JobSpec, Workload, WorkloadError

Unrunnable = Literal["error", "drop", "restrict"]
CHOICES: tuple[Unrunnable, ...] = ("error", "drop", "restrict")
FIX = ("--unrunnable drop (remove them) or restrict (only on the types they progress on); "
       "in a sweep file, [trace] unrunnable")


def progress_types(spec: JobSpec, model: ThroughputModel, types: Sequence[str]
                   ) -> tuple[str, ...]:
    """The ``types`` on which the job progresses at its GPU count, both on one node and, for
    a multi-GPU job, spread over nodes: the check must not depend on a composition's world
    (spread or consolidated rates), so every composition of a comparison keeps the same
    jobs."""
    job = make_job(id=spec.id, submit_time=spec.submit_time, num_gpus=spec.num_gpus,
                   model=spec.model)
    spans = (1, 2) if spec.num_gpus > 1 else (1,)
    return tuple(t for t in types
                 if all(model.rate(job, spec.num_gpus, n, t) > 0 for n in spans))


def handle_unrunnable(workload: Workload, model: ThroughputModel, types: Sequence[str],
                      how: str = "error", gpus: Mapping[str, int] | None = None
                      ) -> tuple[Workload, int]:
    """``workload`` with its unrunnable jobs handled as ``how`` says, and how many there were
    (0: the workload itself, unchanged). ``gpus`` (GPUs per type, when known) lets
    ``restrict`` refuse a job its types are too small for: it would wait forever."""
    if how not in CHOICES:
        raise WorkloadError(f"unrunnable must be one of {', '.join(CHOICES)}, got {how!r}")
    types = tuple(dict.fromkeys(types))
    usable = {j.id: progress_types(j, model, types) for j in workload.jobs}
    bad = [j for j in workload.jobs if len(usable[j.id]) < len(types)]
    if not bad:
        return workload, 0
    if how == "drop":
        return replace(workload, jobs=tuple(j for j in workload.jobs
                                            if len(usable[j.id]) == len(types))), len(bad)
    room = {j.id: sum((gpus or {}).get(t, j.num_gpus) for t in usable[j.id]) for j in bad}
    first = next((j for j in bad if room[j.id] < j.num_gpus), bad[0])
    if how == "error" or room[first.id] < first.num_gpus:
        raise WorkloadError(_message(first, usable[first.id], types, len(bad), how))
    return replace(workload, jobs=tuple(
        replace(j, gpu_types=usable[j.id]) if len(usable[j.id]) < len(types) else j
        for j in workload.jobs)), len(bad)


def _message(job: JobSpec, usable: tuple[str, ...], types: tuple[str, ...], count: int,
             how: str) -> str:
    what = f"job {job.id} ({job.model or 'no model'}, {job.num_gpus} GPU(s))"
    missing = ", ".join(t for t in types if t not in usable)
    if how == "restrict" and not usable:
        return (f"{what} makes no progress on any GPU type of the cluster ({missing}): "
                "restrict cannot keep it; use --unrunnable drop")
    if how == "restrict":
        return (f"{what} progresses only on {', '.join(usable)}, which has fewer GPUs than it "
                "asks for: restrict cannot keep it; use --unrunnable drop")
    return (f"{what} makes no progress on GPU type(s) {missing}; {count} job(s) are like it:"
            f" choose {FIX}")
