from __future__ import annotations

import heapq

from blox_slurm.core.abstractions import FreeView
from blox_slurm.core.fit import on_fixed_nodes, required_nodes
from blox_slurm.core.model import ClusterSnapshot, GpuId, Job
from blox_slurm.core.registry import register


@register("placement", "scattered")
class Scattered:
    """Any free GPUs anywhere, spread one at a time over the nodes with the most free GPUs.

    Succeeds whenever enough GPUs are free in total (a 4-GPU job into 3+2 free GPUs), and puts
    a 1-GPU job on the emptiest node: the load-balancing end of the placement spectrum. Only
    nodes of the job's required GPU type count when it has one. A job bound to ``k`` nodes
    (the ``nodes`` hint, e.g. a Slurm ``--gres=gpu:N`` job: ``k = 1``) is not scattered: it
    takes its per-node share on the ``k`` emptiest nodes that hold it.
    """

    def __init__(self, params: object = None) -> None:
        pass

    def choose(
        self, snapshot: ClusterSnapshot, job: Job, count: int, free: FreeView
    ) -> tuple[GpuId, ...] | None:
        if count > free.count:
            return None
        nodes = required_nodes(job)
        if nodes is not None:  # the emptiest nodes, as for a 1-GPU job
            return on_fixed_nodes(free, nodes, count, lambda _, gpus: -len(gpus))
        heap = [(-len(g), i, g) for i, g in enumerate(free.by_node.values()) if g]
        heapq.heapify(heap)
        taken: dict[int, int] = {}
        out: list[GpuId] = []
        while len(out) < count:
            neg, i, gpus = heapq.heappop(heap)
            k = taken.get(i, 0)
            out.append(gpus[k])
            taken[i] = k + 1
            if neg + 1 < 0:
                heapq.heappush(heap, (neg + 1, i, gpus))
        return tuple(sorted(out))
