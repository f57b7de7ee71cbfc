from __future__ import annotations

from collections.abc import Sequence

from blox_slurm.core.model import ClusterSnapshot, Job
from blox_slurm.core.registry import register


@register("admission", "accept_all")
class AcceptAll:
    """Admit every job as it arrives."""

    def __init__(self, params: object = None) -> None:
        pass

    def admit(self, snapshot: ClusterSnapshot, waiting: Sequence[Job]) -> Sequence[int]:
        return [j.id for j in waiting]
