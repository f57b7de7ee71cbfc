from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from blox_slurm.core.abstractions import Fits, FreeView, PreemptionBase
from blox_slurm.core.model import Job
from blox_slurm.core.registry import register


@register("preemption", "none")
class NoPreemption(PreemptionBase):
    """Never stop a running job; ``backfill`` (default on) lets smaller jobs use idle GPUs."""

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        backfill: bool = True

    def __init__(self, params: Params | None = None) -> None:
        self.backfill = (params or self.Params()).backfill

    def victims(
        self, job: Job, candidates: Sequence[Job], free: FreeView, count: int, fits: Fits
    ) -> Sequence[Job]:
        return ()
