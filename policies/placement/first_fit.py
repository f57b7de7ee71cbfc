from __future__ import annotations

from blox_slurm.core.abstractions import FreeView, first_gpus
from blox_slurm.core.fit import on_fixed_nodes, required_nodes
from blox_slurm.core.model import ClusterSnapshot, GpuId, Job
from blox_slurm.core.registry import register


@register("placement", "first_fit")
class FirstFit:
    """The first free GPUs in node order, spanning nodes when needed (Blox's placement), on
    nodes of the job's required GPU type if it has one. A job bound to ``k`` nodes (the
    ``nodes`` hint, e.g. a Slurm ``--gres=gpu:N`` job: ``k = 1``) goes to the first ``k``
    nodes with its per-node share free, never spread further."""

    def __init__(self, params: object = None) -> None:
        pass

    def choose(
        self, snapshot: ClusterSnapshot, job: Job, count: int, free: FreeView
    ) -> tuple[GpuId, ...] | None:
        if count > free.count:
            return None
        nodes = required_nodes(job)
        if nodes is not None:
            return on_fixed_nodes(free, nodes, count)
        return first_gpus(free.by_node.values(), count)
