from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from blox_slurm.core.abstractions import FreeView, first_gpus
from blox_slurm.core.fit import on_fixed_nodes, required_nodes
from blox_slurm.core.model import ClusterSnapshot, GpuId, Job
from blox_slurm.core.registry import register


@register("placement", "consolidated")
class Consolidated:
    """Fewest nodes: a node whose free GPUs fit exactly, else the smallest that fits.

    A job that fits on one node but finds no node with enough free GPUs waits for one
    (consolidation matters for communication-heavy jobs) unless ``spread_if_needed``. A job
    larger than any node spans the fewest nodes: those with the most free GPUs first. Only
    nodes of the job's required GPU type count when it has one. A job bound to ``k`` nodes
    (the ``nodes`` hint, e.g. a Slurm ``--gres=gpu:N`` job: ``k = 1``) takes its per-node
    share on the ``k`` nodes that fit it most tightly, and never spreads, whatever
    ``spread_if_needed`` says.
    """

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        spread_if_needed: bool = False

    def __init__(self, params: Params | None = None) -> None:
        self.spread_if_needed = (params or self.Params()).spread_if_needed

    def choose(
        self, snapshot: ClusterSnapshot, job: Job, count: int, free: FreeView
    ) -> tuple[GpuId, ...] | None:
        if count > free.count:
            return None
        nodes = required_nodes(job)
        if nodes is not None:  # best fit: the fewest free GPUs that hold the share
            return on_fixed_nodes(free, nodes, count, lambda _, gpus: len(gpus))
        best: tuple[GpuId, ...] | None = None
        for gpus in free.by_node.values():
            n = len(gpus)
            if n == count:
                return gpus
            if n > count and (best is None or n < len(best)):
                best = gpus
        if best is not None:
            return best[:count]
        largest = max((len(n.gpu_ids) for n in snapshot.nodes if n.name in free.by_node),
                      default=0)
        if count <= largest and not self.spread_if_needed:
            return None
        return first_gpus(sorted(free.by_node.values(), key=len, reverse=True), count)
