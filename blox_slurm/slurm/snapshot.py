"""Slurm's view (:class:`SlurmJob`, :class:`SlurmNode`) -> the core :class:`ClusterSnapshot`.

What Slurm cannot know — a job's isolated duration, the service it received in earlier runs,
whether the admission policy let it in, model and hints — comes from ``extras``, the history
the controller keeps in its store. Without extras a snapshot is still complete and valid;
the fields just take the conservative defaults documented on :class:`JobExtras`.

Choices that matter to policies:

* nodes in natural name order (node2 before node10), GPUs numbered node by node, so GPU ids
  are stable while the node set is;
* only pending and running jobs are listed (``COMPLETING`` ones are left out: their GPUs free
  within seconds, and a policy must not preempt a job that is already stopping);
* jobs that ask for no GPU are left out: the core's invariant is "running <=> holds GPUs".
"""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from operator import attrgetter
from types import MappingProxyType

from ..core.model import ClusterSnapshot, Gpu, GpuSample, Job, JobState, Node, NodeState, make_job
from ..core.records import maker
from ..core.throughput import ThroughputModel
from .client import SlurmJob, SlurmNode
from .parse import ParsedJob

#: Hints that only Slurm's own request fields may set: never taken from ``extras`` (the
#: store's copy of the user's ``--comment`` hints), always rebuilt from the job's request.
SLURM_HINTS = ("gpu_type", "nodes")


@dataclass(frozen=True, slots=True)
class JobExtras:
    """Per-job facts the controller remembers across rounds and requeues.

    ``None`` means "not known": ``admitted`` then defaults to "running", ``preemptions`` to
    Slurm's restart count, ``first_start``/``last_event`` to what Slurm's times imply.
    """

    attained_base: float = 0.0
    work_base: float = 0.0
    duration: float | None = None
    admitted: bool | None = None
    model: str = ""
    hints: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    preemptions: int | None = None
    first_start: float | None = None
    last_event: float | None = None
    submit_time: float | None = None  # the first seen: Slurm resets it on every requeue
    marks: tuple[tuple[str, float], ...] = ()  # policy marks (Decisions.marks) kept by the store

    def admitted_copy(self) -> JobExtras:
        """These extras with ``admitted=True``: what the store keeps for a job the round's
        admission let in. Built field by field: ``dataclasses.replace`` took 3 us a job, and a
        first round admits every waiting job (20,000 of them, 0.06 s); through
        :func:`make_extras`, 0.7 us."""
        return make_extras(attained_base=self.attained_base, work_base=self.work_base,
                           duration=self.duration, admitted=True, model=self.model,
                           hints=self.hints, preemptions=self.preemptions,
                           first_start=self.first_start, last_event=self.last_event,
                           submit_time=self.submit_time, marks=self.marks)


#: ``JobExtras(**fields)``, 0.7 us instead of 1.2 (see :mod:`blox_slurm.core.records`): the
#: store builds one for every row of a first fold, and its admitted copy.
make_extras = maker(JobExtras)
_NO_EXTRAS = JobExtras()


def natural_key(name: str) -> tuple[object, ...]:
    """``node10`` sorts after ``node2``."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def node_state(n: SlurmNode) -> NodeState:
    if n.down:
        return NodeState.DOWN
    if n.draining:
        return NodeState.DRAIN
    return NodeState.UP


def gpu_type(n: SlurmNode) -> str:
    """The gres type (``gpu:v100:4``); else the node's only feature; else ``gpu``."""
    if n.gpu_type:
        return n.gpu_type
    if len(n.features) == 1:
        return next(iter(n.features))
    return "gpu"


def build_snapshot(
    jobs: Iterable[SlurmJob],
    nodes: Iterable[SlurmNode],
    partitions: Collection[str] | None = None,
    *,
    now: float | None = None,
    extras: Mapping[int, JobExtras] | None = None,
    throughput: ThroughputModel | None = None,
    usage: Mapping[str, float] | None = None,
    telemetry: tuple[GpuSample, ...] = (),
    cache: JobCache | None = None,
) -> ClusterSnapshot:
    """The snapshot of ``partitions`` (every partition when None). ``cache``: the same
    :class:`JobCache` every round, to reuse the core records of jobs that did not change."""
    wanted = set(partitions) if partitions is not None else None
    layout = _layout(nodes, wanted)
    t = time.time() if now is None else now
    return ClusterSnapshot(
        now=t,
        nodes=layout.nodes,
        gpus=layout.gpus,
        jobs=_core_jobs(jobs, wanted, extras or {}, layout.ids_of, t,
                        cache if cache is not None else JobCache()),
        telemetry=telemetry,
        throughput=throughput,
        usage=dict(usage or {}),
    )


@dataclass(frozen=True, slots=True)
class _Layout:
    """The core's nodes and GPUs, and which GPU ids each node's GPUs got (``ids_of``, by node
    name): what a job's Slurm allocation is translated through."""

    nodes: tuple[Node, ...]
    gpus: tuple[Gpu, ...]
    ids_of: Mapping[str, tuple[int, ...]]


def _layout(nodes: Iterable[SlurmNode], wanted: set[str] | None) -> _Layout:
    """The nodes in any of the ``wanted`` partitions, in natural name order, their GPUs
    numbered node by node: ids stay stable while the node set does."""
    picked = sorted(
        (n for n in nodes if wanted is None or wanted & set(n.partitions)),
        key=lambda n: natural_key(n.name),
    )
    core_nodes: list[Node] = []
    gpus: list[Gpu] = []
    ids_of: dict[str, tuple[int, ...]] = {}
    for n in picked:
        kind = gpu_type(n)
        ids = tuple(range(len(gpus), len(gpus) + n.gpus_total))
        gpus.extend(Gpu(g, n.name, i, kind) for i, g in enumerate(ids))
        ids_of[n.name] = ids
        core_nodes.append(
            Node(n.name, ids, kind, n.cpus, n.memory_mb, node_state(n), n.features)
        )
    return _Layout(tuple(core_nodes), tuple(gpus), ids_of)


class JobCache:
    """The core :class:`Job` of every waiting job of the last build, with the Slurm record and
    the extras it was built from.

    At 20,000 queued jobs rebuilding every record was most of a warm round, and between two
    rounds nearly every waiting job is the same: the queue read hands back the very record it
    gave last round while the job's line is unchanged, and the store the very extras while
    its row is. Both are frozen, so a job whose record *and* extras are the objects it was
    built from gets the same core record; any change (state, priority, request, hints, marks,
    service, admission) comes as a new object and rebuilds it. Only records that do not
    depend on the time are kept: a waiting job that Slurm gave no submit time and the store
    none either is placed at ``now``, and a running one's GPUs depend on the node layout.
    """

    def __init__(self) -> None:
        self._kept: dict[int, tuple[SlurmJob, JobExtras, Job | None]] = {}

    def jobs(self, seen: Iterable[tuple[SlurmJob, JobExtras]],
             ids_of: Mapping[str, tuple[int, ...]], now: float) -> list[Job | None]:
        """The core record of each ``(record, extras)`` (see :func:`_job`); keeps only
        this build's jobs for the next."""
        last, kept = self._kept, {}
        out: list[Job | None] = []
        for j, x in seen:
            hit = last.get(j.job_id)
            if hit is None or hit[0] is not j or hit[1] is not x:
                hit = (j, x, _job(j, x, ids_of, now))
            if not j.active and (x.submit_time or j.submit_time is not None):
                kept[j.job_id] = hit
            out.append(hit[2])
        self._kept = kept
        return out


def _core_jobs(jobs: Iterable[SlurmJob], wanted: set[str] | None,
               extras: Mapping[int, JobExtras], ids_of: Mapping[str, tuple[int, ...]],
               now: float, cache: JobCache) -> tuple[Job, ...]:
    """The pending and running jobs of the ``wanted`` partitions that the core can hold (see
    :func:`_job`), by submit time then id: one order, whatever order Slurm listed them in."""
    core_jobs = cache.jobs(((j, extras.get(j.job_id, _NO_EXTRAS)) for j in jobs
                            if (wanted is None or j.partition in wanted)
                            and (j.pending or j.active)), ids_of, now)
    return tuple(sorted((j for j in core_jobs if j is not None), key=_ORDER))


_ORDER = attrgetter("submit_time", "id")


def _allocated(j: SlurmJob, ids_of: Mapping[str, tuple[int, ...]]) -> tuple[int, ...]:
    out: list[int] = []
    for node in j.nodes:
        alloc = j.gpu_alloc.get(node)
        node_ids = ids_of.get(node, ())
        if alloc is None or not node_ids:
            continue
        # Slurm reports IDX for File=-backed GPUs; without it, the count is all we know.
        indices = alloc.indices or tuple(range(alloc.count))
        out.extend(node_ids[i] for i in indices if i < len(node_ids))
    return tuple(out)


def _job(
    j: SlurmJob, x: JobExtras, ids_of: Mapping[str, tuple[int, ...]], now: float
) -> Job | None:
    if j.num_gpus <= 0:
        return None
    submit = x.submit_time or (j.submit_time if j.submit_time is not None else now)
    run_since: float | None = None
    first_start = x.first_start  # for a pending job: unknown without the controller's history
    if j.active:
        gpus = _allocated(j, ids_of)
        if not gpus:  # running outside the nodes we see (another partition's node)
            return None
        run_since = j.start_time if j.start_time is not None else now
        state, last_event = JobState.RUNNING, run_since
        first_start = first_start if first_start is not None else run_since
    else:
        gpus, state = (), JobState.PENDING
        last_event = x.last_event if x.last_event is not None else submit
    return make_job(
        id=j.job_id,
        submit_time=submit,
        num_gpus=len(gpus) if gpus else j.num_gpus,
        user=j.user,
        account=j.account,
        model=x.model,
        duration=x.duration,
        cpus=j.cpus,
        memory_mb=j.memory_mb,
        state=state,
        admitted=x.admitted if x.admitted is not None else state is JobState.RUNNING,
        gpus=gpus,
        attained_base=x.attained_base,
        work_base=x.work_base,
        run_since=run_since,
        work_since=run_since,
        first_start=first_start,
        last_event=last_event,
        preemptions=x.preemptions if x.preemptions is not None else j.restart_cnt,
        hints=_hints(j, x),
        marks=x.marks,
    )


def _hints(j: SlurmJob, x: JobExtras) -> tuple[tuple[str, str], ...]:
    """The job's hints, plus two that come from its Slurm request and nothing else (a user's
    ``--comment`` can neither set nor clear them, see :data:`SLURM_HINTS`):

    * ``gpu_type``: a GPU type requested from Slurm (``--gres=gpu:v100:2``);
    * ``nodes``: the exact node count of a job that asked for GPUs *per node*
      (``--gres=gpu:N``, ``--gpus-per-node=N``; ``-N k`` or 1): Slurm gives it N GPUs on every
      node it is pinned to, so a placement must put it on exactly that many nodes, the same
      number of GPUs on each. A job that asked ``--gpus=N`` (per job) or per task gets none:
      Slurm keeps its total exact over any pinned node set;
    * ``min_gpus``/``max_gpus``: the GPU counts a policy may give the job (see
      :func:`blox_slurm.core.fit.gpu_range`). Its owner's bounds if it opted in with
      ``elastic=1`` (``min_gpus`` 1 unless given), else exactly its request: the controller
      never resizes a job that did not ask for it.
    """
    gpu_nodes = j.gpu_nodes if isinstance(j, ParsedJob) else 0
    if not x.hints:
        return _request_hints(j.num_gpus, j.gpu_type, gpu_nodes)
    return _merged_hints(x.hints, j.num_gpus, j.gpu_type, gpu_nodes)


def _merged_hints(user: Mapping[str, str], num_gpus: int, gpu_type: str,
                  gpu_nodes: int) -> tuple[tuple[str, str], ...]:
    """The owner's hints and the request's (see :func:`_hints`)."""
    hints = {k: str(v) for k, v in user.items() if k not in SLURM_HINTS}
    if "elastic" in hints:
        hints.setdefault("min_gpus", "1")
    else:
        hints["min_gpus"] = hints["max_gpus"] = str(num_gpus)
    if gpu_type:
        hints["gpu_type"] = gpu_type
    if gpu_nodes > 0:
        hints["nodes"] = str(gpu_nodes)
    return tuple(sorted(hints.items()))


@lru_cache(maxsize=1024)
def _request_hints(num_gpus: int, gpu_type: str, gpu_nodes: int) -> tuple[tuple[str, str], ...]:
    """The hints of a job that gave none: one shared tuple per request shape, not three new
    tuples and two strings per job (20,000 jobs' worth on a first round, kept while they
    wait)."""
    return _merged_hints({}, num_gpus, gpu_type, gpu_nodes)
