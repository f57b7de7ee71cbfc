"""The typed state that flows between Blox's extension points.

Everything here is immutable. A world (simulator, Slurm) builds a :class:`ClusterSnapshot`,
hands it to :func:`blox_slurm.core.round.decide`, and gets :class:`Decisions` back; no policy can
change what another one sees.

Why time-varying quantities are *methods* of :class:`Job` instead of fields: a running job's
attained service and progress change continuously. Storing them as fields would force the
simulator to rebuild every running job's record every round (hundreds of allocations per round,
tens of thousands of rounds). Instead a job records the values at its last state change plus
the rate since then, and :meth:`Job.attained_service` / :meth:`Job.work_done` evaluate them at
``snapshot.now``. A job record is replaced only when its state changes (start, preempt, finish),
which is an event the world handles anyway.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .records import maker

if TYPE_CHECKING:  # these modules import this one
    from .abstractions import FreeView
    from .service_index import ServiceIndex
    from .throughput import ThroughputModel

GpuId = int
"""A GPU's cluster-wide index: position in :attr:`ClusterSnapshot.gpus`."""


class JobState(enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"


class NodeState(enum.Enum):
    UP = "up"
    DRAIN = "drain"  # finishing what runs, no new work
    DOWN = "down"


@dataclass(frozen=True, slots=True)
class Gpu:
    id: GpuId
    node: str
    index: int  # index on its node (CUDA_VISIBLE_DEVICES ordinal)
    type: str = "gpu"


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    gpu_ids: tuple[GpuId, ...]
    gpu_type: str = "gpu"
    cpus: int = 0
    memory_mb: int = 0
    state: NodeState = NodeState.UP
    features: frozenset[str] = frozenset()

    @property
    def schedulable(self) -> bool:
        return self.state is NodeState.UP


@dataclass(frozen=True, slots=True)
class Job:
    """One training job as the policies see it.

    ``duration`` is the job's isolated run time in seconds at its requested GPU count,
    consolidated, on the reference GPU type: the oracle SRTF and Optimus use, and the unit of
    ``work_base`` (so ``remaining = duration - work_done(now)``). Worlds that do not know it
    leave it ``None``; policies that need it then fall back (documented per policy).
    """

    id: int
    submit_time: float
    num_gpus: int
    user: str = ""
    account: str = ""
    model: str = ""
    duration: float | None = None
    cpus: int = 0
    memory_mb: int = 0
    state: JobState = JobState.PENDING
    admitted: bool = False
    gpus: tuple[GpuId, ...] = ()  # allocation while RUNNING
    # Values at the last state change; see the module docstring.
    attained_base: float = 0.0  # GPU-seconds of service before the current run
    work_base: float = 0.0  # isolated-seconds of work done before the current run
    run_since: float | None = None  # when the current run took its GPUs
    work_since: float | None = None  # when the current run starts making progress (restart cost)
    rate: float = 1.0  # isolated-seconds of work per second in the current run
    first_start: float | None = None
    last_event: float = 0.0  # submit, start or preemption time: what starvation is measured from
    preemptions: int = 0
    hints: tuple[tuple[str, str], ...] = ()  # validated user hints (key, value), sorted
    # Policy marks: small per-job memory a policy asked the world to keep (``Decisions.marks``),
    # e.g. Tiresias' service reset on promotion. Sorted (key, value) pairs.
    marks: tuple[tuple[str, float], ...] = ()

    @property
    def running(self) -> bool:
        return self.state is JobState.RUNNING

    def hint(self, key: str, default: str | None = None) -> str | None:
        for k, v in self.hints:
            if k == key:
                return v
        return default

    def mark(self, key: str, default: float = 0.0) -> float:
        for k, v in self.marks:
            if k == key:
                return v
        return default

    def attained_service(self, now: float) -> float:
        """GPU-seconds received so far (LAS's and Tiresias' measure)."""
        if self.run_since is None:
            return self.attained_base
        return self.attained_base + len(self.gpus) * max(0.0, now - self.run_since)

    def work_done(self, now: float) -> float:
        if self.work_since is None or now <= self.work_since:
            return self.work_base
        return self.work_base + self.rate * (now - self.work_since)

    def remaining(self, now: float) -> float | None:
        """Isolated seconds of work left, or ``None`` when the world has no duration."""
        if self.duration is None:
            return None
        return max(0.0, self.duration - self.work_done(now))


#: ``Job(**fields)`` at a third of the cost (1.3 us instead of 3.5 for a simulated arrival's
#: ten fields, see :mod:`blox_slurm.core.records`): a simulation builds one at every arrival
#: and another for every trace job's runnability check, two million in a million-job run; a
#: controller's first round, one for every waiting job.
make_job = maker(Job)


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One telemetry reading for one GPU."""

    gpu: GpuId
    time: float
    utilization: float  # percent, 0..100
    memory_used_mb: float = 0.0
    memory_total_mb: float = 0.0
    job_ids: tuple[int, ...] = ()
    errors: int = 0  # XID / uncorrected ECC events since the previous sample


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    now: float
    nodes: tuple[Node, ...]
    gpus: tuple[Gpu, ...]
    jobs: tuple[Job, ...]  # every job the policies may act on: pending and running
    telemetry: tuple[GpuSample, ...] = ()
    throughput: ThroughputModel | None = None  # how fast jobs run: the world's own model
    # Decayed historical GPU-seconds of finished runs (completed or preempted), maintained by
    # the world for fair share, keyed by :func:`usage_key` (``"user:alice"``, ``"account:ml"``).
    usage: Mapping[str, float] = field(default_factory=dict)
    # Optional index a world may keep incrementally: the free GPUs of every UP node (the round
    # works on a copy). Must agree with ``jobs``; without it the round derives it from the
    # allocations.
    free: FreeView | None = None
    # Optional index: the jobs of ``jobs`` that hold no GPUs, in ``jobs`` order. Lets a round
    # find the few waiting jobs without a pass over hundreds of running ones.
    pending: tuple[Job, ...] | None = None
    # Optional index: the running jobs by attained service, kept as they start and stop and
    # sealed with ``jobs`` (see :class:`~blox_slurm.core.service_index.ServiceIndex`), for a
    # scheduler that declares ``reads_service_index`` (LAS). A snapshot made from this one
    # with other jobs may keep it: it answers only for the jobs it was sealed with.
    by_service: ServiceIndex | None = None
    # Optional: free CPUs per node as the world's resource manager counts them (Slurm: every
    # job's, managed or not). ``None`` where CPUs are not modelled (the simulator). Placement
    # keeps a job off nodes that cannot hold its CPUs: their free GPUs are no use to it.
    cpus_free: Mapping[str, int] | None = None
    # ... and free memory per node in MB, the same way (Slurm: RealMemory - AllocMem, which
    # is every node's RealMemory where memory is not consumable).
    memory_free: Mapping[str, int] | None = None
    # What the composition asked the world to keep between rounds (``Decisions.state``), as
    # marks are for one job: e.g. the synthesizer's current candidate and when it is due.
    state: Mapping[str, float] = field(default_factory=dict)

    @property
    def total_gpus(self) -> int:
        return len(self.gpus)

    def node_of(self, gpu: GpuId) -> str:
        return self.gpus[gpu].node


def usage_key(kind: str, name: str) -> str:
    """Key of ``ClusterSnapshot.usage`` for a user or account (``kind`` is "user"/"account"):
    one mapping holds both, so a user and an account of the same name do not collide."""
    return f"{kind}:{name}"


def build_cluster(groups: list[tuple[str, int, int]], prefix: str = "node") -> tuple[
    tuple[Node, ...], tuple[Gpu, ...]
]:
    """Nodes and GPUs from ``[(gpu_type, nodes, gpus_per_node), ...]``, numbered in order."""
    nodes: list[Node] = []
    gpus: list[Gpu] = []
    for gpu_type, count, per_node in groups:
        for _ in range(count):
            name = f"{prefix}{len(nodes) + 1}"
            ids = tuple(range(len(gpus), len(gpus) + per_node))
            gpus.extend(Gpu(i, name, i - ids[0], gpu_type) for i in ids)
            nodes.append(Node(name, ids, gpu_type))
    return tuple(nodes), tuple(gpus)


@dataclass(frozen=True, slots=True)
class Start:
    """A waiting job starts on ``gpus``."""

    job_id: int
    gpus: tuple[GpuId, ...]


@dataclass(frozen=True, slots=True)
class Stop:
    """A running job is checkpointed and waits: stopped so that ``for_job`` (ranked higher)
    can run, or, with ``for_job`` None, by the cluster manager or by its scheduler
    (``Schedule.stop``)."""

    job_id: int
    for_job: int | None = None


@dataclass(frozen=True, slots=True)
class Move:
    """A running job is checkpointed and restarted on ``gpus`` in the same round: to the GPU
    type its scheduler chose (``for_job`` None), or, stopped so that ``for_job`` can run, on
    GPUs left over. A world carries it out as a stop and a start of the same job."""

    job_id: int
    gpus: tuple[GpuId, ...]
    for_job: int | None = None


#: The three by keyword at about half their ``__init__``'s cost (see
#: :mod:`blox_slurm.core.records`): a Gavel run's rounds make 700,000 of them.
make_start, make_stop, make_move = maker(Start), maker(Stop), maker(Move)


@dataclass(frozen=True, slots=True)
class Drain:
    node: str
    reason: str


@dataclass(frozen=True, slots=True)
class Decisions:
    """What one round wants the world to do. Worlds apply it; they never reinterpret it.

    ``start`` starts waiting jobs, ``stop`` checkpoints running ones that then wait, ``move``
    checkpoints running ones and restarts them elsewhere at once: the three never share a job.
    ``order`` ranks every admitted job the scheduler saw, highest priority first: Slurm maps it
    to ``Priority=`` for the jobs that must still wait. ``reasons`` (only filled when
    ``decide(..., explain=True)``) says why each job that does not run is waiting, and why
    each stopped or moved one was.
    """

    admit: tuple[int, ...] = ()
    start: tuple[Start, ...] = ()
    stop: tuple[Stop, ...] = ()
    move: tuple[Move, ...] = ()
    order: tuple[int, ...] = ()
    drain: tuple[Drain, ...] = ()
    flag: tuple[tuple[int, str], ...] = ()  # jobs a policy reports without acting (dry-run)
    marks: tuple[tuple[int, str, float], ...] = ()  # (job, key, value) for the world to keep
    state: tuple[tuple[str, float], ...] = ()  # (key, value): the composition's, to keep
    reasons: Mapping[int, str] = field(default_factory=dict)
    composition: str = ""  # the composition that decided (a synthesizer's current candidate)

    @property
    def preempt(self) -> tuple[int, ...]:
        """Every job this round checkpoints: the stopped and the moved ones."""
        return (*(s.job_id for s in self.stop), *(m.job_id for m in self.move))

    @property
    def placed(self) -> tuple[Start, ...]:
        """Every job this round puts on GPUs: the started and the moved ones, where to."""
        return (*self.start, *(Start(m.job_id, m.gpus) for m in self.move))

    @property
    def empty(self) -> bool:
        return not (self.admit or self.start or self.stop or self.move or self.drain
                    or self.marks or self.state)


#: ``Decisions(...)`` and ``ClusterSnapshot(...)`` at a fraction of the cost, as
#: :data:`make_start`: a simulation makes one of each every round.
make_decisions, make_snapshot = maker(Decisions), maker(ClusterSnapshot)
