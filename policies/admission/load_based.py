from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from blox_slurm.core.model import ClusterSnapshot, Job
from blox_slurm.core.registry import register
from blox_slurm.policies.scheduling.fifo import arrival_key


@register("admission", "load_based")
class LoadBased:
    """Admit while active GPU demand stays within k x cluster GPUs; the rest wait in FIFO order.

    Active demand is the GPUs requested by admitted jobs that have not finished (running or
    waiting). The overflow queue is strict: a job that does not fit blocks later arrivals, so
    a large job cannot be starved by a stream of small ones.
    """

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        k: float = Field(default=1.2, gt=0)

    def __init__(self, params: Params | None = None) -> None:
        self.k = (params or self.Params()).k

    def admit(self, snapshot: ClusterSnapshot, waiting: Sequence[Job]) -> Sequence[int]:
        limit = self.k * snapshot.total_gpus
        demand = sum(j.num_gpus for j in snapshot.jobs if j.admitted or j.running)
        out: list[int] = []
        for j in sorted(waiting, key=arrival_key):
            if demand + j.num_gpus > limit:
                break
            demand += j.num_gpus
            out.append(j.id)
        return out
