"""Pollux (Qiao et al., OSDI'21): GPU counts for every job, re-decided each round, that
maximize the fairness-weighted sum of the jobs' speedups, the jobs picking their batch sizes.

The artifact searches allocations with a genetic algorithm. Here the search is exact over GPU
counts: the objective is a sum of one term per job under one capacity constraint, so a
dynamic program over (jobs, GPUs used) finds the best counts in O(jobs x GPUs x counts),
under a millisecond for workload-6. Counts are those a packed placement can always honour
(1, 2, 4, ... up to a node, then whole nodes), which is where the program is narrower than
the artifact's search over (nodes, replicas) placements.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from blox_slurm.core.abstractions import Schedule, SchedulingBase
from blox_slurm.core.fit import gpu_count, gpu_range, required_nodes
from blox_slurm.core.model import ClusterSnapshot, Job, NodeState
from blox_slurm.core.registry import register
from blox_slurm.core.throughput import (
    ADAPTIVE,
    DEFAULT_THROUGHPUT,
    SpeedupModel,
    ThroughputModel,
)

MOST = "pollux.most"  # the mark: the most GPUs a job has run on (how far it may grow)
_NONE = -1e9  # a job without GPUs: below any speedup's term, so everyone runs if GPUs allow

Speedup = Callable[[Job, int], float]


def counts_for(per_node: int, capacity: int) -> list[int]:
    """The GPU counts a job may get: 0, powers of two within a node, then whole nodes.
    Counts of this shape fill nodes without fragments when placed largest first."""
    within = [1 << k for k in range(per_node.bit_length()) if 1 << k <= per_node]
    return [0, *within, *range(2 * per_node, capacity + 1, per_node)]


def _own_count(job: Job) -> int | None:
    """The count a Slurm job brings beyond the packed shapes: its minimum, which for a job
    that did not opt in (``min_gpus = max_gpus``) is its size, and for an elastic one may be
    a count no shape has (3). ``None`` for a job without hints (a trace's)."""
    return gpu_range(job)[0] if job.hints else None


def _allowed(job: Job, counts: Sequence[int], cap: int, shaped: frozenset[int],
             per_node: int) -> set[int]:
    """The counts ``job`` may run on: no more than its nodes hold, and counts the engine
    would give it unchanged: its own if it may not be resized, else within its bounds, a
    multiple of its node count, within its growth ``cap`` and of the packed shapes or its
    minimum."""
    lo, hi = gpu_range(job)
    nodes = required_nodes(job)  # a Slurm job asking per node keeps its node count
    most = cap if nodes is None else min(cap, nodes * per_node)
    if lo == hi:
        return {lo} if nodes is None or lo <= nodes * per_node else set()
    return {n for n in counts
            if n <= most and (n in shaped or n == lo) and gpu_count(job, n) == n}


def allocate(values: Sequence[Sequence[float]], counts: Sequence[int],
             capacity: int) -> list[int]:
    """The counts (one per row of ``values``, whose columns follow ``counts``) maximizing
    the sum of the chosen values within ``capacity`` GPUs: a knapsack over the jobs by
    dynamic programming. ``-inf`` forbids a count; ties go to fewer GPUs."""
    best = np.zeros(capacity + 1)  # the best sum using at most c GPUs
    picks = []
    for row in values:
        cand = np.full((capacity + 1, len(counts)), -np.inf)
        for i, (n, v) in enumerate(zip(counts, row, strict=True)):
            if n <= capacity and v > -np.inf:
                cand[n:, i] = best[:capacity + 1 - n] + v
        pick = np.argmax(cand, axis=1)
        best = cand[np.arange(capacity + 1), pick]
        picks.append(pick)
    chosen, c = [], capacity
    for pick in reversed(picks):
        n = counts[int(pick[c])]
        chosen.append(n)
        c -= n
    return chosen[::-1]


def _speedup_fn(snapshot: ClusterSnapshot, per_node: int, gpu_type: str) -> Speedup:
    """The snapshot's model's speedups; for a model without them (any other workload), the
    ratio of its rates on ``n`` GPUs packed and on one."""
    model: ThroughputModel = snapshot.throughput or DEFAULT_THROUGHPUT
    now = snapshot.now
    if isinstance(model, SpeedupModel):
        return lambda job, n: model.speedup(job, n, now)

    def by_rate(job: Job, n: int) -> float:
        one = model.rate(job, 1, 1, gpu_type)
        return model.rate(job, n, math.ceil(n / per_node), gpu_type) / one if one > 0 else 0.0

    return by_rate


@register("scheduling", "pollux")
class Pollux(SchedulingBase):
    """Pollux's allocation: each job's term is ``-speedup ** p`` (p < 0: fairness; p = -1
    sums inverse speedups), where a job's speedup on ``n`` GPUs is its goodput there over
    that on one GPU (the model's :class:`~blox_slurm.core.throughput.SpeedupModel`). A
    running job given another count pays the artifact's restart penalty: its speedup is
    scaled by ``max(age - restarts * delay, 0) / (age + delay)``. A job grows to at most
    ``growth`` x the most GPUs it has run on (the artifact lets a job grow to twice what it
    was profiled on). Every job is marked adaptive: it picks its batch size for its GPUs.

    The order puts shrinking jobs first (their GPUs free up for the others), then those
    keeping their count, the ones starting, the growing ones, and last the running and
    waiting jobs that get none (starters may stop the former; nobody stops for the latter).
    Pair with packed placement (consolidated) and priority preemption.
    """

    time_dependent = True  # speedups change as jobs train, and the penalty with age

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        p: float = Field(default=-1.0, lt=0.0)
        restart_delay: float = Field(default=30.0, ge=0.0)
        growth: float = Field(default=2.0, ge=1.0)

    def __init__(self, params: Params | None = None) -> None:
        self.params = params or self.Params()

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        up = [n for n in snapshot.nodes if n.state is NodeState.UP]
        per_node = max((len(n.gpu_ids) for n in up), default=1) or 1
        shaped = counts_for(per_node, sum(len(n.gpu_ids) for n in up))
        ranked = sorted(jobs, key=lambda j: (j.submit_time, j.id))
        # Slurm jobs bring their own count: a fixed size, an elastic job's minimum.
        counts = sorted({*shaped, *filter(None, map(_own_count, ranked))})
        # A job on a node not UP (draining) keeps its GPUs: they are not the policy's to give.
        on_up = {g for n in up for g in n.gpu_ids}
        free = [j for j in ranked if on_up.issuperset(j.gpus)]
        capacity = len(on_up) - sum(len(j.gpus) for j in ranked if not on_up.issuperset(j.gpus))
        speedup = _speedup_fn(snapshot, per_node, up[0].gpu_type if up else "gpu")
        shapes = frozenset(shaped)
        values = [self._values(job, counts, speedup, snapshot.now, shapes, per_node)
                  for job in free]
        alloc = {j.id: len(j.gpus) for j in ranked}
        alloc.update(zip((j.id for j in free), allocate(values, counts, max(capacity, 0)),
                         strict=True))
        return Schedule(_ranked(ranked, alloc), {i: n for i, n in alloc.items() if n},
                        marks=_marks(ranked))

    def _values(self, job: Job, counts: Sequence[int], speedup: Speedup, now: float,
                shaped: frozenset[int], per_node: int) -> list[float]:
        """``job``'s term at each count: ``-inf`` where it may not run (:func:`_allowed`:
        above its growth cap, outside its bounds), the penalized speedup's ``-s ** p``
        otherwise (``_NONE`` with no GPUs or no speed)."""
        held = len(job.gpus)
        # A job starts on one GPU, or on its minimum if it set one (else it could never run).
        cap = max(gpu_range(job)[0], int(self.params.growth * max(job.mark(MOST), held)))
        age = now - job.submit_time
        delay = self.params.restart_delay
        penalty = max(age - job.preemptions * delay, 0.0) / (age + delay) if held else 1.0
        allowed = _allowed(job, counts, cap, shaped, per_node)
        row = [_NONE]
        for n in counts[1:]:
            if n not in allowed:
                row.append(-np.inf)
                continue
            s = speedup(job, n) * (1.0 if n == held else penalty)
            row.append(-(s ** self.params.p) if s > 0 else _NONE)
        return row


def _ranked(jobs: Sequence[Job], alloc: dict[int, int]) -> list[Job]:
    """Shrinking, keeping, starting, growing, then the running and waiting ones left out."""

    def group(job: Job) -> int:
        n, held = alloc[job.id], len(job.gpus)
        if n == 0:
            return 4 if held else 5
        if not held:
            return 2
        return 0 if n < held else 1 if n == held else 3

    return sorted(jobs, key=group)  # stable: arrival order within a group


def _marks(jobs: Sequence[Job]) -> tuple[tuple[int, str, float], ...]:
    """Adaptive for every job not marked yet; the most GPUs for those running on more."""
    marks = [(j.id, ADAPTIVE, 1.0) for j in jobs if not j.mark(ADAPTIVE)]
    marks += [(j.id, MOST, float(len(j.gpus))) for j in jobs if len(j.gpus) > j.mark(MOST)]
    return tuple(marks)
