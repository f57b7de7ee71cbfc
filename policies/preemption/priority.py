from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from blox_slurm.core.abstractions import Fits, FreeView, PreemptionBase
from blox_slurm.core.model import Job
from blox_slurm.core.registry import register


@register("preemption", "priority")
class PriorityPreemption(PreemptionBase):
    """Stop the lowest-ranked running jobs, only when that makes the waiting job fit.

    Victims are taken from the tail of the order until the placement policy finds room. With
    ``minimize`` (default) victims that turned out unnecessary (e.g. on a node the job does
    not use) are spared again, highest-ranked first; Blox's behaviour is ``minimize = false``.
    ``backfill`` lets lower-ranked jobs use GPUs a blocked job cannot.
    """

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        backfill: bool = True
        minimize: bool = True

    def __init__(self, params: Params | None = None) -> None:
        p = params or self.Params()
        self.backfill = p.backfill
        self.spares_victims = p.minimize

    def victims(
        self, job: Job, candidates: Sequence[Job], free: FreeView, count: int, fits: Fits
    ) -> Sequence[Job]:
        trial = free.copy()
        chosen: list[Job] = []
        for victim in reversed(candidates):
            trial.give(victim.gpus)
            chosen.append(victim)
            if trial.count >= count and fits(trial):
                break
        else:
            return ()
        if self.spares_victims and len(chosen) > 1:
            for victim in reversed(chosen[:-1]):
                rest = [c for c in chosen if c is not victim]
                trial = free.copy()
                for c in rest:
                    trial.give(c.gpus)
                if trial.count >= count and fits(trial):
                    chosen = rest
        return chosen
