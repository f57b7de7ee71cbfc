"""Synergy-style placement: CPUs and memory are packed as resources of their own.

Synergy (Mohan et al., OSDI '22) observes that giving every job CPU and memory in proportion to
its GPUs (a node with 4 GPUs and 32 CPUs hands 8 CPUs to each GPU) strands GPUs: a CPU-light job
holds CPUs it does not use while a CPU-hungry job cannot start next to it although the node has
the CPUs in total. Placing jobs by what they ask for (Slurm's ``--cpus-per-task``/``--mem``,
``Job.cpus``/``Job.memory_mb``) fills those GPUs.

Accounting. ``FreeGpus`` holds only GPUs, so each node's CPU and memory use is derived per GPU:
a GPU missing from the free set is charged to the running job holding it, at that job's demand
divided by its GPU count (a job spanning nodes is thereby split in proportion to its GPUs on
each); a job asking for 0 (unknown) is charged the node's GPU-proportional share, which is what
Synergy assumes for it. A GPU missing from the free set that no running job holds was placed
earlier this round; the job it went to is not visible, so it is charged the GPU-proportional
share too (an estimate, exact for demand-less jobs). A GPU of a running job that is back in the
free set (a preemption victim) is free, its CPUs and memory with it. A node reporting 0 CPUs or
0 memory (the simulator's default) does not track that resource; with neither tracked the
policy reduces to best-fit consolidation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from blox_slurm.core.abstractions import FreeView
from blox_slurm.core.fit import required_nodes
from blox_slurm.core.model import ClusterSnapshot, GpuId, Job, Node
from blox_slurm.core.registry import register

EPS = 1e-9  # shares are fractional CPUs/MB: tolerate float rounding in comparisons


def _caps(node: Node) -> tuple[float, ...]:
    """Tracked capacities of ``node`` besides GPUs: (cpus, memory), 0 meaning untracked."""
    return (float(node.cpus), float(node.memory_mb))


def _need(job: Job, node: Node, total: int) -> list[float]:
    """CPUs and memory one GPU of ``job`` (``total`` GPUs in all) costs on ``node``: its demand
    spread evenly over its GPUs, or the node's GPU-proportional share when it asks for none."""
    size = len(node.gpu_ids)
    return [d / total if d else cap / size
            for d, cap in zip((job.cpus, job.memory_mb), _caps(node), strict=True)]


# (rank, GPUs) of a node that fits: rank = (stranding, free GPUs left, node order).
_Fit = tuple[tuple[float, int, int], tuple[GpuId, ...]]


def _least_stranding(fits: Sequence[_Fit], k: int) -> tuple[GpuId, ...] | None:
    """The GPUs of the ``k`` best-ranked fitting nodes for a job bound to ``k`` nodes (``None``
    when fewer fit): it never spans beyond them, so it waits rather than take others."""
    if len(fits) < k:
        return None
    out = [g for _, gpus in sorted(fits, key=lambda kg: kg[0])[:k] for g in gpus]
    return tuple(sorted(out)) if k > 1 else tuple(out)


@register("placement", "synergy")
class Synergy:
    """Packs GPUs, CPUs and memory together, so GPU-proportional CPU/memory is not a hard rule.

    A job fits a node when the node has its GPUs free and, for every resource the node
    tracks, the CPUs/memory the job asks for there (a multi-node job's demand split in
    proportion to its GPUs per node; a job asking for 0 takes the GPU-proportional share).
    Among single nodes that fit, the choice minimizes **stranding**: with ``f_r`` the fraction
    of resource r (GPU, CPU, memory; tracked ones) the node would have left free, the score is
    ``max_r f_r - min_r f_r`` — the largest fraction of any resource that GPU-proportional
    work could no longer use because another resource ran out first. Ties go to the node left
    with the fewest free GPUs (best fit), then node order. A job that fits no single node spans
    nodes, most free GPUs first, each taking as many GPUs as its resources allow.

    ``mode = "proportional"`` is the baseline Synergy improves on: every job holds exactly its
    GPU-proportional CPUs and memory, so those never run out before GPUs, and a job asking for
    more per GPU than a node's per-GPU share cannot run there at all. Only nodes of the job's
    required GPU type count when it has one.

    A job bound to ``k`` nodes (the ``nodes`` hint, e.g. a Slurm ``--gres=gpu:N`` job:
    ``k = 1``) never spans beyond them: it takes ``count / k`` GPUs on each of the ``k``
    nodes that fit that share (GPUs and resources) with the least stranding (ties as above),
    or waits.
    """

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        mode: Literal["tune", "proportional"] = "tune"

    def __init__(self, params: Params | None = None) -> None:
        self.tune = (params or self.Params()).mode == "tune"

    def choose(
        self, snapshot: ClusterSnapshot, job: Job, count: int, free: FreeView
    ) -> tuple[GpuId, ...] | None:
        if count > free.count:
            return None
        fixed = required_nodes(job)
        if fixed is not None and count % fixed:
            return None
        per = count // fixed if fixed is not None else count
        nodes = {n.name: n for n in snapshot.nodes if n.name in free.by_node}
        left = self._left(snapshot, nodes, free) if self.tune else {}
        fits = self._fits(job, per, count, free, nodes, left)
        if fixed is not None:
            return _least_stranding(fits, fixed)
        if fits:
            return min(fits, key=lambda kg: kg[0])[1]
        return self._span(job, count, free, nodes, left)

    def _fits(self, job: Job, per: int, total: int, free: FreeView, nodes: dict[str, Node],
              left: dict[str, list[float]]) -> list[_Fit]:
        """Every node that can give ``job`` ``per`` of its ``total`` GPUs (free GPUs, and the
        CPUs/memory for them), with its first ``per`` free GPUs and its rank: least stranding,
        then fewest free GPUs left (best fit), then node order."""
        fits: list[_Fit] = []
        for i, (name, gpus) in enumerate(free.by_node.items()):
            if len(gpus) < per:
                continue
            node, rest = nodes[name], left.get(name)
            if self._room(job, per, total, node, rest) < per:
                continue
            key = (self._stranding(job, per, node, len(gpus), rest, total), len(gpus) - per, i)
            fits.append((key, gpus[:per]))
        return fits

    def _left(self, snapshot: ClusterSnapshot, nodes: dict[str, Node], free: FreeView
              ) -> dict[str, list[float]]:
        """Free CPUs and memory of every node in ``free`` that tracks either (module docstring)."""
        tracked = {name: node for name, node in nodes.items() if node.gpu_ids and any(_caps(node))}
        if not tracked:
            return {}
        holder: dict[GpuId, Job] = {}
        for j in snapshot.jobs:
            holder.update((g, j) for g in j.gpus)
        left: dict[str, list[float]] = {}
        for name, node in tracked.items():
            rest = list(_caps(node))
            idle = set(free.by_node[name])
            share = [cap / len(node.gpu_ids) for cap in rest]
            for g in node.gpu_ids:
                if g in idle:
                    continue
                owner = holder.get(g)
                cost = _need(owner, node, len(owner.gpus)) if owner is not None else share
                rest = [r - c for r, c in zip(rest, cost, strict=True)]
            left[name] = rest
        return left

    def _room(self, job: Job, want: int, total: int, node: Node,
              left: Sequence[float] | None) -> int:
        """How many of ``want`` GPUs the node's CPUs/memory let ``job`` take (``total`` GPUs in
        all, which fixes its demand per GPU); free GPUs are the caller's check."""
        needs = zip(_need(job, node, total), _caps(node), strict=True)
        if not self.tune:  # the hard rule: at most the node's per-GPU share of each resource
            size = len(node.gpu_ids)
            return want if all(need <= cap / size + EPS for need, cap in needs if cap) else 0
        if left is None:
            return want
        for (need, cap), rest in zip(needs, left, strict=True):
            if cap:
                want = min(want, int(rest / need + EPS))
        return max(want, 0)

    def _stranding(self, job: Job, count: int, node: Node, n_free: int,
                   left: Sequence[float] | None, total: int | None = None) -> float:
        """``max_r f_r - min_r f_r`` over the node's resources after placing ``count`` of the
        job's ``total`` GPUs (``count`` when None) there."""
        fractions = [(n_free - count) / len(node.gpu_ids)]
        if left is not None:
            for need, cap, rest in zip(_need(job, node, total or count), _caps(node), left,
                                       strict=True):
                if cap:
                    fractions.append((rest - need * count) / cap)
        return max(fractions) - min(fractions)

    def _span(self, job: Job, count: int, free: FreeView, nodes: dict[str, Node],
              left: dict[str, list[float]]) -> tuple[GpuId, ...] | None:
        """``count`` GPUs over several nodes, most free GPUs first, each node giving as many as
        its CPUs/memory allow at the job's per-GPU demand; ``None`` when they add up to fewer."""
        out: list[GpuId] = []
        for name, gpus in sorted(free.by_node.items(), key=lambda kv: -len(kv[1])):
            if not gpus:
                break
            take = self._room(job, min(len(gpus), count - len(out)), count, nodes[name],
                              left.get(name))
            out.extend(gpus[:take])
            if len(out) == count:
                return tuple(sorted(out))
        return None
