from __future__ import annotations

from blox_slurm.core.abstractions import ClusterView
from blox_slurm.core.model import ClusterSnapshot
from blox_slurm.core.registry import register

_NOTHING = ClusterView()


@register("cluster", "static")
class Static:
    """Take the cluster as it is: only nodes the world reports UP receive new work."""

    def __init__(self, params: object = None) -> None:
        pass

    def manage(self, snapshot: ClusterSnapshot) -> ClusterView:
        return _NOTHING
