"""Blox's extension points, each a tiny Protocol (the Kubernetes scheduler-framework split).

A round runs them in this order (see :mod:`blox_slurm.round`):

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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol, runtime_checkable

from .model import ClusterSnapshot, Decisions, Drain, Gpu, GpuId, Job, NodeState


class FreeGpus:
    """Free GPUs per schedulable node, in node order: the working set placement draws from.

    A small mutable value owned by one round; placement policies only read it (``take`` and
    ``give`` are called by the round engine and preemption policies, on copies).
    """

    __slots__ = ("by_node", "count", "held", "_gpus")

    def __init__(self, by_node: dict[str, list[GpuId]], gpus: Sequence[Gpu], held: int = 0):
        self.by_node = by_node
        self.count = sum(len(v) for v in by_node.values())
        self.held = held  # GPUs held by running jobs anywhere in the cluster
        self._gpus = gpus

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, exclude: frozenset[str] = frozenset()) -> FreeGpus:
        """Free GPUs of the UP nodes not in ``exclude``."""
        busy = {g for job in snapshot.jobs for g in job.gpus}
        up = NodeState.UP
        by_node = {
            n.name: [g for g in n.gpu_ids if g not in busy] if busy else list(n.gpu_ids)
            for n in snapshot.nodes
            if n.state is up and n.name not in exclude
        }
        return cls(by_node, snapshot.gpus, len(busy))

    def copy(self) -> FreeGpus:
        return FreeGpus({k: v[:] for k, v in self.by_node.items()}, self._gpus, self.held)

    def take(self, gpus: Sequence[GpuId]) -> None:
        for g in gpus:
            self.by_node[self._gpus[g].node].remove(g)
        self.count -= len(gpus)

    def give(self, gpus: Sequence[GpuId]) -> None:
        """Return GPUs of a preempted job (only those on nodes still schedulable)."""
        for g in gpus:
            free = self.by_node.get(self._gpus[g].node)
            if free is not None:
                free.append(g)
                free.sort()
                self.count += 1


@dataclass(frozen=True, slots=True)
class Schedule:
    """A scheduling policy's answer: priority order, and GPU counts where they differ from the
    request (Optimus' elastic allocation)."""

    order: Sequence[Job]
    gpus: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClusterView:
    """A cluster manager's answer: nodes that take no new work, drains to request, flags."""

    unschedulable: frozenset[str] = frozenset()
    drain: tuple[Drain, ...] = ()
    flag: tuple[tuple[int, str], ...] = ()
    preempt: tuple[int, ...] = ()  # jobs to stop regardless of priority (e.g. idle GPUs)


@runtime_checkable
class AdmissionPolicy(Protocol):
    def admit(self, snapshot: ClusterSnapshot, waiting: Sequence[Job]) -> Sequence[int]:
        """Ids, among ``waiting`` (pending, not yet admitted, arrival order), to admit now."""
        ...


@runtime_checkable
class SchedulingPolicy(Protocol):
    # True when the order can change with time alone (attained service, waiting time): the
    # simulator may skip rounds in which nothing happened only for time-independent policies.
    time_dependent: ClassVar[bool]

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule: ...


@runtime_checkable
class PlacementPolicy(Protocol):
    def choose(
        self, snapshot: ClusterSnapshot, job: Job, count: int, free: FreeGpus
    ) -> tuple[GpuId, ...] | None:
        """``count`` GPUs for ``job`` out of ``free``, or ``None`` when it does not fit."""
        ...


Fits = Callable[[FreeGpus], bool]


@runtime_checkable
class PreemptionPolicy(Protocol):
    backfill: bool  # keep placing lower-ranked jobs when a higher-ranked one does not fit

    def victims(
        self, job: Job, candidates: Sequence[Job], free: FreeGpus, count: int, fits: Fits
    ) -> Sequence[Job]:
        """Running jobs to stop so ``job`` (wanting ``count`` GPUs) fits, chosen from
        ``candidates`` (ranked below it, lowest last); ``fits(trial)`` asks the placement policy.
        Empty when preempting would not make it fit or is not wanted."""
        ...


@runtime_checkable
class ClusterManager(Protocol):
    def manage(self, snapshot: ClusterSnapshot) -> ClusterView: ...


@runtime_checkable
class MetricCollector(Protocol):
    def collect(self, snapshot: ClusterSnapshot, decisions: Decisions) -> Mapping[str, float]:
        ...

