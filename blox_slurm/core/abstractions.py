"""Blox's extension points, each a tiny Protocol (the Kubernetes scheduler-framework split).

A round runs them in this order (see :mod:`blox_slurm.core.round`):

1. ``ClusterManager.manage``   which nodes may take new work; drains; flags
2. ``AdmissionPolicy.admit``   which waiting jobs enter the scheduler's view
3. ``SchedulingPolicy.order``  priority order of admitted jobs (+ optional GPU counts)
4. ``PlacementPolicy.choose``  which free GPUs a job gets
5. ``PreemptionPolicy.victims`` which running jobs to stop so a higher-ranked one fits

Policies are pure: they read the snapshot and return values. Any memory a policy needs across
rounds must be derivable from the snapshot (attained service, last event time, admitted flag,
usage), which is what lets the same object run in the simulator and against Slurm.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import filterfalse
from typing import ClassVar, Protocol, runtime_checkable

from .model import ClusterSnapshot, Decisions, Drain, Gpu, GpuId, Job, NodeState


class FreeView(Protocol):
    """What a policy may read of a free-GPU pool: the engine's working copy (placement) or the
    world's index (``ClusterSnapshot.free``). Read-only, as the type checker holds a policy
    to: ``copy()`` gives a pool of one's own to change (a preemption trial)."""

    @property
    def by_node(self) -> Mapping[str, tuple[GpuId, ...]]: ...

    @property
    def count(self) -> int: ...

    def copy(self) -> FreeGpus: ...


class FreeGpus:
    """Free GPUs per schedulable node, in node order: the working set placement draws from.

    Values are tuples, so a copy (a preemption trial) is one C-level dict copy however large
    the cluster; ``take``/``give`` replace the tuples of the nodes they touch. Placement
    policies only read it; the round engine and preemption policies change their own copies.
    """

    __slots__ = ("by_node", "count", "_gpus", "_views", "_views_of")

    def __init__(self, by_node: dict[str, tuple[GpuId, ...]], gpus: Sequence[Gpu]):
        self.by_node = by_node
        self.count = sum(map(len, by_node.values()))
        self._gpus = gpus
        self._views: dict[tuple[str, ...], FreeGpus] | None = None  # see only()
        self._views_of: dict[str, list[FreeGpus]] | None = None  # node -> views holding it

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, exclude: frozenset[str] = frozenset()) -> FreeGpus:
        """Free GPUs of the UP nodes not in ``exclude``.

        Uses the world's index ``snapshot.free`` when it has one (the simulator keeps it
        incrementally); otherwise derives it from the running jobs' allocations.
        """
        if snapshot.free is not None:
            twin = snapshot.free.copy()  # keeps its count: no pass over the nodes
            for name in exclude:
                twin.count -= len(twin.by_node.pop(name, ()))
            return twin
        busy = {g for job in snapshot.jobs for g in job.gpus}
        up = NodeState.UP
        by_node = {
            n.name: tuple(g for g in n.gpu_ids if g not in busy)
            for n in snapshot.nodes
            if n.state is up and n.name not in exclude
        }
        return cls(by_node, snapshot.gpus)

    def copy(self) -> FreeGpus:
        twin = FreeGpus.__new__(FreeGpus)
        twin.by_node, twin.count, twin._gpus = dict(self.by_node), self.count, self._gpus
        twin._views = twin._views_of = None
        return twin

    def only(self, names: tuple[str, ...]) -> FreeGpus:
        """The pool restricted to the nodes ``names`` (in node order, as the pool's), for
        placement to read: made once and kept in step with this pool's ``take`` and
        ``give``. The engine's filter stage asks for a GPU type's nodes at every placement
        (356,000 in a Gavel run), and building each restricted pool anew was most of it."""
        views, views_of = self._views, self._views_of
        if views is None or views_of is None:
            views, views_of = self._views, self._views_of = {}, {}
        view = views.get(names)
        if view is None:
            by_node = self.by_node
            view = views[names] = FreeGpus(
                {name: by_node[name] for name in names if name in by_node}, self._gpus)
            for name in view.by_node:
                views_of.setdefault(name, []).append(view)
        return view

    def _sync(self, node: str) -> None:
        """The views of :meth:`only` holding ``node`` take its new free GPUs."""
        gpus = self.by_node[node]
        for view in (self._views_of or {}).get(node, ()):
            view.count += len(gpus) - len(view.by_node[node])
            view.by_node[node] = gpus

    def take(self, gpus: Sequence[GpuId]) -> None:
        if not gpus:
            return
        by_node = self.by_node
        node = self._gpus[gpus[0]].node
        free = by_node[node]
        n = len(gpus)
        if free[:n] == gpus:  # the first free GPUs of one node (placement's usual answer)
            by_node[node] = free[n:]
            if self._views_of:
                self._sync(node)
        elif n == 1:  # a 1-GPU job's: no sets to build
            one = gpus[0]
            if one in free:  # two slices: half the cost of a filter through one.__ne__
                at = free.index(one)
                by_node[node] = free[:at] + free[at + 1:]
            if self._views_of:
                self._sync(node)
        else:
            gone = set(gpus).__contains__
            for node in {self._gpus[g].node for g in gpus}:
                by_node[node] = tuple(filterfalse(gone, by_node[node]))
                if self._views_of:
                    self._sync(node)
        self.count -= n

    def give(self, gpus: Sequence[GpuId]) -> None:
        """Return GPUs of a preempted or finished job (only those on nodes still
        schedulable)."""
        gpus_, by_node = self._gpus, self.by_node
        if len(gpus) == 1:  # as in take: most gives of a large run, no grouping needed
            node = gpus_[gpus[0]].node
            free = by_node.get(node)
            if free is not None:
                by_node[node] = tuple(sorted((*free, gpus[0])))
                self.count += 1
                if self._views_of:
                    self._sync(node)
            return
        # One pass groups them by node: a preemption trial returns the GPUs of dozens of
        # victims at once, and a pass per node touched was most of a Gavel run's time.
        back: dict[str, list[GpuId]] = {}
        for g in gpus:
            back.setdefault(gpus_[g].node, []).append(g)
        for node, mine in back.items():
            free = by_node.get(node)
            if free is not None:
                by_node[node] = tuple(sorted((*free, *mine)))
                self.count += len(mine)
                if self._views_of:
                    self._sync(node)


def first_gpus(groups: Iterable[tuple[GpuId, ...]], count: int) -> tuple[GpuId, ...] | None:
    """The first ``count`` GPUs taken from ``groups`` (per-node free lists) in the order
    given, spanning nodes; ``None`` when they hold fewer."""
    out: list[GpuId] = []
    for gpus in filter(None, groups):  # skips full nodes in C: most of a busy cluster
        out.extend(gpus[: count - len(out)])
        if len(out) == count:
            return tuple(out)
    return None


@dataclass(frozen=True, slots=True)
class Schedule:
    """A scheduling policy's answer: priority order, GPU counts where they differ from the
    request (Optimus' elastic allocation; for a running job, a count other than the one it
    holds resizes it: Pollux), and GPU types for jobs that must get one this round (Gavel's
    per-round type choice; placement sees it as the job's ``gpu_type`` hint). The engine
    keeps every count within what the job allows (:func:`~blox_slurm.core.fit.gpu_count`)."""

    order: Sequence[Job]
    gpus: Mapping[int, int] = field(default_factory=dict)
    types: Mapping[int, str] = field(default_factory=dict)
    # (job id, key, value): memory the policy needs next round, kept by the world on the job
    # (``Job.marks``). This is how a pure policy carries state, e.g. Tiresias' service reset.
    marks: tuple[tuple[int, str, float], ...] = ()
    # Running jobs the scheduler does not run this round (Gavel's rounds: those it did not
    # pick). The engine stops them before the walk, so their GPUs need no preemption search;
    # one whose GPUs nobody took by the end of the walk keeps running.
    stop: frozenset[int] = frozenset()
    # True: the running jobs moved to another type (``types``) leave their GPUs before the
    # walk too, and take GPUs of their new type at their rank; one that finds none keeps its
    # own if nobody took them, else waits. For a scheduler that re-picks every job every
    # round (Gavel's): its moves then need no swaps found by preemption searches.
    free_movers: bool = False


class Ranked(list[Job]):
    """A scheduler's order (``Schedule.order``) that also says which positions hold the
    pending jobs (``pending_at``, ascending) and which running jobs hold the others, in
    order (``running``). The round's walk reads these instead of passing over every ranked
    job to tell them apart: a thousand jobs on a busy cluster, in each of the ~90,000
    preempting rounds of a million-job LAS run. Made by a merge that knows both as it goes
    (:class:`~blox_slurm.core.service_index.ServiceIndex`); a plain list says nothing."""

    __slots__ = ("pending_at", "running")

    def __init__(self) -> None:
        super().__init__()
        self.pending_at: list[int] = []
        self.running: list[Job] = []


@dataclass(frozen=True, slots=True)
class ClusterView:
    """A cluster manager's answer: nodes that take no new work, drains to request, flags."""

    unschedulable: frozenset[str] = frozenset()
    drain: tuple[Drain, ...] = ()
    flag: tuple[tuple[int, str], ...] = ()
    preempt: tuple[int, ...] = ()  # jobs to stop regardless of priority (e.g. idle GPUs)


class SchedulingBase:
    """What a scheduling policy declares besides ``order``, at the safe defaults. Subclass it
    (the built-ins do) or set both class attributes yourself: the registry refuses a
    scheduling policy that declares them neither way, so the round engine and the simulator
    read declared capabilities, never guesses."""

    #: The order can change with time alone (attained service, waiting time). The simulator
    #: skips rounds in which nothing happened only for a policy that declares False.
    time_dependent: ClassVar[bool] = True
    #: The order is a sort by a key of each job and the snapshot alone, and a job's GPU
    #: counts, types and marks ignore the other jobs: ordering any subset gives the full
    #: order restricted to it, so a round may rank only the pending jobs.
    keyed: ClassVar[bool] = False
    #: The order reads ``ClusterSnapshot.by_service`` when the world keeps it: a world
    #: keeps that index (a cost at every start and stop) only for a policy that says so.
    reads_service_index: ClassVar[bool] = False


class PreemptionBase:
    """What a preemption policy declares besides ``victims``, at the defaults; subclass it
    or set both attributes yourself (instance attributes may override them per parameters)."""

    #: Keep placing lower-ranked jobs when a higher-ranked one does not fit.
    backfill: bool = True
    #: Victims the waiting job turned out not to need keep running, and a victim whose GPUs
    #: went to nobody else restarts at once. False is Blox: every victim tried is stopped.
    spares_victims: bool = True


@runtime_checkable
class AdmissionPolicy(Protocol):
    def admit(self, snapshot: ClusterSnapshot, waiting: Sequence[Job]) -> Sequence[int]:
        """Ids, among ``waiting`` (pending, not yet admitted, arrival order), to admit now."""
        ...


@runtime_checkable
class SchedulingPolicy(Protocol):
    time_dependent: ClassVar[bool]  # see SchedulingBase
    keyed: ClassVar[bool]

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        """Rank ``jobs``."""
        ...


@runtime_checkable
class PlacementPolicy(Protocol):
    def choose(
        self, snapshot: ClusterSnapshot, job: Job, count: int, free: FreeView
    ) -> tuple[GpuId, ...] | None:
        """``count`` GPUs for ``job`` out of ``free``, or ``None`` when it does not fit."""
        ...


Fits = Callable[[FreeView], bool]


@runtime_checkable
class PreemptionPolicy(Protocol):
    backfill: bool  # see PreemptionBase
    spares_victims: bool

    def victims(
        self, job: Job, candidates: Sequence[Job], free: FreeView, count: int, fits: Fits
    ) -> Sequence[Job]:
        """Running jobs to stop so ``job`` (wanting ``count`` GPUs) fits, chosen from
        ``candidates`` (ranked below it, lowest last; for a policy that ``spares_victims``,
        only those holding a GPU of a type ``job`` may use); ``fits(trial)`` asks the
        placement policy. Empty when preempting would not make it fit or is not wanted."""
        ...


@runtime_checkable
class ClusterManager(Protocol):
    def manage(self, snapshot: ClusterSnapshot) -> ClusterView: ...


@runtime_checkable
class MetricCollector(Protocol):
    def collect(self, snapshot: ClusterSnapshot, decisions: Decisions) -> Mapping[str, float]:
        ...

