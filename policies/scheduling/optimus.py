from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from blox_slurm.core.abstractions import Schedule, SchedulingBase
from blox_slurm.core.fit import gpu_range, required_nodes
from blox_slurm.core.model import ClusterSnapshot, Job, Node, NodeState
from blox_slurm.core.registry import register
from blox_slurm.core.throughput import DEFAULT_THROUGHPUT, ThroughputModel

# (marginal gain T(n+1) - T(n), submit time, id, job): a min-heap pops the biggest speed-up
# first, ties by arrival.
_Offer = tuple[float, float, int, Job]


def _remaining(job: Job, now: float) -> float:
    """Remaining time, infinite without an oracle duration: such jobs rank last and never grow,
    since no gain can be computed for them."""
    r = job.remaining(now)
    return math.inf if r is None else r


def _spare(snapshot: ClusterSnapshot, up: Sequence[Node], running: Sequence[Job]) -> int:
    """Free GPUs of UP nodes: a job still running on a draining node holds none of them."""
    up_names = {n.name for n in up}
    gpus = snapshot.gpus
    busy = sum(1 for j in running for g in j.gpus if gpus[g].node in up_names)
    return sum(len(n.gpu_ids) for n in up) - busy


def _admit(pending: Sequence[Job], spare: int) -> dict[int, int]:
    """Requested GPU counts of the pending jobs that fit, in rank order: a job that does not
    fit is skipped, not waited for, so smaller ones behind it may still start."""
    alloc: dict[int, int] = {}
    for j in pending:
        if j.num_gpus <= spare:
            alloc[j.id] = j.num_gpus
            spare -= j.num_gpus
    return alloc


@dataclass(frozen=True)
class _Runtime:
    """``T(n)``, a job's remaining time at ``n`` GPUs, from the snapshot's throughput model:
    the simulator's own model, so policy and world agree on what a GPU more is worth."""

    model: ThroughputModel
    per_node: int  # GPUs of the largest UP node: how many nodes ``n`` GPUs span
    gpu_type: str  # the first UP node's: every job is rated as if on that type
    now: float

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, up: Sequence[Node]) -> _Runtime:
        per_node = max((len(n.gpu_ids) for n in up), default=1) or 1
        return cls(snapshot.throughput or DEFAULT_THROUGHPUT, per_node,
                   up[0].gpu_type if up else "gpu", snapshot.now)

    def at(self, job: Job, n: int) -> float:
        nodes = math.ceil(n / self.per_node)
        return _remaining(job, self.now) / max(self.model.rate(job, n, nodes, self.gpu_type),
                                               1e-9)

    def offer(self, job: Job, n: int) -> _Offer:
        """``job``'s bid for its ``n + 1``-th GPU (negative gain: it gets faster)."""
        return (self.at(job, n + 1) - self.at(job, n), job.submit_time, job.id, job)


@register("scheduling", "optimus")
class Optimus(SchedulingBase):
    """Optimus-style elastic allocation: shortest remaining time first, then spare GPUs go
    one at a time to the job whose remaining time drops most (Peng et al., EuroSys'18).

    Each round, pending jobs are ranked by estimated remaining time (oracle duration; jobs
    without one last) and take their requested GPUs while free GPUs last. The GPUs still
    free are then handed out greedily by marginal gain: for a job at ``n`` GPUs the gain of
    one more is ``T(n) - T(n+1)`` with ``T(n) = remaining / rate(n)`` from the snapshot's
    throughput model (the simulator's own model, so policy and world agree). A job grows to at
    most ``max_scale`` x its request and ``max_gpus``. Running jobs keep their size (a resize
    would be a checkpoint-restart) and rank above pending ones, so Optimus never preempts.
    The returned ``Schedule.gpus`` is honoured by placement; pair it with a placement that can
    span nodes (first_fit, scattered) so grown jobs are not stranded by consolidation.
    """

    time_dependent = True

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        max_scale: float = Field(default=4.0, ge=1.0)
        max_gpus: int = Field(default=8, ge=1)

    def __init__(self, params: Params | None = None) -> None:
        p = params or self.Params()
        self.max_scale = p.max_scale
        self.max_gpus = p.max_gpus

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        now = snapshot.now
        up = [n for n in snapshot.nodes if n.state is NodeState.UP]
        running = sorted((j for j in jobs if j.running), key=lambda j: (j.submit_time, j.id))
        pending = sorted((j for j in jobs if not j.running),
                         key=lambda j: (_remaining(j, now), j.submit_time, j.id))
        spare = _spare(snapshot, up, running)
        alloc = _admit(pending, spare)
        self._grow(pending, alloc, spare - sum(alloc.values()), _Runtime.of(snapshot, up))
        grown = {j.id: alloc[j.id] for j in pending if alloc.get(j.id, j.num_gpus) != j.num_gpus}
        return Schedule([*running, *pending], grown)

    def _cap(self, job: Job, runtime: _Runtime) -> int:
        """The most GPUs ``job`` may grow to. A job bound to k nodes (``--gres=gpu:N`` on
        Slurm: one node) grows at most to what k of the largest nodes hold: grown past that
        it could never be placed, and waited forever on an idle cluster."""
        cap = min(self.max_gpus, int(job.num_gpus * self.max_scale))
        bound = required_nodes(job)
        if bound is not None:
            cap = max(job.num_gpus, min(cap, bound * runtime.per_node))
        hi = gpu_range(job)[1]  # a Slurm job that did not opt in to resizing: its request
        return cap if hi is None else min(cap, hi)

    def _grow(self, pending: Sequence[Job], alloc: dict[int, int], spare: int,
              runtime: _Runtime) -> None:
        """Hand ``spare`` GPUs out one at a time (in ``alloc``) to the admitted job whose
        remaining time drops most, until they run out or no job speeds up from one more."""
        heap: list[_Offer] = []
        for j in pending:
            n = alloc.get(j.id)
            if (n is not None and n < self._cap(j, runtime)
                    and _remaining(j, runtime.now) < math.inf):
                heap.append(runtime.offer(j, n))
        heapq.heapify(heap)
        while spare > 0 and heap:
            neg_gain, _, _, j = heapq.heappop(heap)
            if neg_gain >= 0:
                break  # nobody speeds up from another GPU
            n = alloc[j.id] = alloc[j.id] + 1
            spare -= 1
            if n < self._cap(j, runtime):
                heapq.heappush(heap, runtime.offer(j, n))
