"""A job's state changes, as pure functions: the one definition every world shares.

The simulator applies decisions with these; :func:`apply` carries a whole round's decisions
out on a snapshot at the same instant (what a world would observe right after applying), which
is how idempotence (``decide(apply(s, decide(s))) `` starts and stops nothing) is checked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import fields, replace
from typing import Any

from .model import ClusterSnapshot, Decisions, GpuId, Job, JobState
from .records import unfrozen

_FIELDS = [f.name for f in fields(Job)]


_Unfrozen = unfrozen(Job)  # see _compile (Job derives from object alone: it has a twin)


def _compile(names: tuple[str, ...]) -> Callable[..., Job]:
    """``evolve(job, *values)``: a copy of ``job`` with the fields ``names`` set to
    ``values``, its slots written directly. A frozen dataclass's ``__init__`` routes every
    one of the 23 fields through ``object.__setattr__`` (record rebuilding was ~7% of a large
    simulation), and a loop over the slots costs twice one generated function per set of
    fields, unrolled as dataclasses generates ``__init__``. The slots are stored on an
    unfrozen twin made a ``Job`` at the end (:func:`~.records.unfrozen`): 2.5x faster than
    calling each slot's setter (0.47 against 1.17 us for a start's record)."""
    unknown = sorted(set(names) - set(_FIELDS))
    if unknown:
        raise TypeError(f"Job has no field(s) {', '.join(unknown)}")
    body = "".join(f"    _out.{f} = {f if f in names else '_job.' + f}\n" for f in _FIELDS)
    namespace: dict[str, Any] = {"_new": object.__new__, "_Job": Job, "_Unfrozen": _Unfrozen}
    exec(f"def evolve(_job, {', '.join(names)}):\n    _out = _new(_Unfrozen)\n{body}"
         "    _out.__class__ = _Job\n    return _out\n", namespace)
    return namespace["evolve"]  # type: ignore[no-any-return]


_EVOLVERS: dict[tuple[str, ...], Callable[..., Job]] = {}  # one per call site's field names


def _evolve(job: Job, **changes: Any) -> Job:
    """``dataclasses.replace`` at a fraction of its cost: the simulator rebuilds a job record
    on every state change, millions of times in a large run."""
    names = tuple(changes)
    evolve = _EVOLVERS.get(names)
    if evolve is None:
        evolve = _EVOLVERS[names] = _compile(names)
    return evolve(job, *changes.values())


# The rebuilds of every start and every stop (355,000 each in a Gavel run on its largest
# trace), compiled once: building ``_evolve``'s keywords and looking its function up was a
# third of their cost. Positional, in these fields' order.
_started = _compile(("state", "admitted", "gpus", "run_since", "work_since", "rate",
                     "last_event", "first_start"))
_preempted = _compile(("state", "gpus", "attained_base", "work_base", "run_since",
                       "work_since", "rate", "preemptions", "last_event"))


def admit(job: Job) -> Job:
    return _evolve(job, admitted=True)


def start(job: Job, gpus: tuple[GpuId, ...], t: float, rate: float = 1.0,
          restart_cost: float = 0.0, latency: float = 0.0, launch: float = 0.0) -> Job:
    """Holding ``gpus`` from ``t``. It runs after ``latency`` (the cluster's decision to
    running delay: on Slurm the GPUs are pinned to it meanwhile, and its run, its attained
    service and its first start count from when Slurm starts it); progress begins ``launch``
    seconds later (the job's own start-up), plus ``restart_cost`` if it was preempted before
    (restoring a checkpoint)."""
    begun = t + latency
    return _started(job, JobState.RUNNING, True, gpus, begun,
                    begun + launch + (restart_cost if job.preemptions else 0.0), rate, t,
                    begun if job.first_start is None else job.first_start)


def unstart(job: Job) -> Job:
    """Back to pending before its run began: a start the cluster had not carried out yet (on
    Slurm the job was released but never ran, and is simply held again), so no preemption,
    no service, and no first start if this was to be it."""
    first = None if job.first_start == job.run_since else job.first_start
    return _evolve(job, state=JobState.PENDING, gpus=(), run_since=None, work_since=None,
                   rate=1.0, first_start=first)


def preempt(job: Job, t: float, stopping: float = 0.0, work: float | None = None) -> Job:
    """Back to pending at ``t``, service and work so far folded into the bases. Its service
    runs on for ``stopping`` seconds: the job holds its GPUs while it stops (on Slurm it is
    COMPLETING, checkpointing, and Slurm shows it in its run until it is pending again).
    ``work``: the work done by ``t`` when the world knows it better than the run's average
    rate does (a run on a progress curve)."""
    return _preempted(job, JobState.PENDING, (), job.attained_service(t + stopping),
                      job.work_done(t) if work is None else work, None, None, 1.0,
                      job.preemptions + 1, t)


def mark(job: Job, updates: Iterable[tuple[str, float]]) -> Job:
    """Set policy marks (see ``Job.marks``), keeping the tuple sorted by key."""
    marks = dict(job.marks)
    marks.update(updates)
    return _evolve(job, marks=tuple(sorted(marks.items())))


def apply(snapshot: ClusterSnapshot, d: Decisions) -> ClusterSnapshot:
    """The snapshot right after carrying out ``d`` at ``snapshot.now`` (rate 1, no restart
    cost, no free-GPU index: the next round derives it afresh)."""
    jobs = {j.id: j for j in snapshot.jobs}
    t = snapshot.now
    for jid in d.admit:
        jobs[jid] = admit(jobs[jid])
    by_job: dict[int, list[tuple[str, float]]] = {}
    for jid, key, value in d.marks:
        by_job.setdefault(jid, []).append((key, value))
    for jid, updates in by_job.items():
        jobs[jid] = mark(jobs[jid], updates)
    for jid in d.preempt:
        if not jobs[jid].running:
            raise ValueError(f"decision preempts job {jid}, which is not running")
        jobs[jid] = preempt(jobs[jid], t)
    for s in d.placed:
        if jobs[s.job_id].running:
            raise ValueError(f"decision starts job {s.job_id}, which is already running")
        jobs[s.job_id] = start(jobs[s.job_id], s.gpus, t)
    return replace(snapshot, jobs=tuple(jobs.values()), free=None, pending=None, by_service=None,
                   state={**snapshot.state, **dict(d.state)})
