"""Themis-style finish-time fairness (Mahajan et al., NSDI'20), as a greedy ordering."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from blox_slurm.core.abstractions import Schedule, SchedulingBase
from blox_slurm.core.model import ClusterSnapshot, Job
from blox_slurm.core.registry import register

MIN_ISOLATED = 1.0
"""Seconds: floor of the isolated-time estimate of a job without a duration, so a job that has
not run yet gets a finite ρ (its wait in seconds) instead of a division by zero."""


def isolated_time(job: Job, now: float) -> float:
    """T_isolated: the job's run time alone on its request.

    The oracle ``duration`` when the world knows it; otherwise the time it has executed so far
    (attained GPU-seconds / requested GPUs, at least :data:`MIN_ISOLATED`), the only evidence
    of its length a world without durations has."""
    if job.duration:
        return job.duration
    return max(job.attained_service(now) / job.num_gpus, MIN_ISOLATED)


def finish_time_fairness(job: Job, now: float) -> float:
    """ρ = T_shared / T_isolated, estimated at ``now``.

    T_shared = (now - submit) + remaining(now): the time already spent in the shared cluster
    plus the isolated-seconds still to do if it ran on its request from now on. With the
    oracle duration a job that ran alone from its submission has ρ = 1, and every second it
    waits adds 1 / duration. Without a duration the remaining time is unknown and counted as 0,
    so ρ = age / executed time: the job that waited most relative to what it got is first.
    """
    remaining = job.remaining(now) or 0.0
    return (now - job.submit_time + remaining) / isolated_time(job, now)


@register("scheduling", "themis")
class Themis(SchedulingBase):
    """Finish-time fairness: a round offers GPUs to the jobs furthest from a fair finish.

    Themis runs a partial-allocation auction each round among the ``1 - f`` fraction of jobs
    with the worst ρ (``fairness_knob`` f): those jobs bid their ρ improvements for offered
    GPUs, the auction maximizes the product of improvements and leftovers go to the rest.
    This policy replaces the auction by a greedy order, which is what a round's placement can
    use: the ``max(1, ceil((1 - f) * N))`` jobs with the highest ρ are eligible; among them
    the one with the largest ρ improvement per GPU from running one more round goes first
    (a round of length Δ lowers ρ by Δ / T_isolated, so per GPU the bid is
    1 / (T_isolated * GPUs): the auction's efficiency side); the ineligible jobs follow by
    highest ρ. f = 1 leaves one eligible job, so the order is purely highest-ρ-first (most
    fair); f = 0 makes every job eligible, so the order is purely by bid (most efficient).
    Not modelled: partial allocations (a job gets its whole request or waits) and the
    auction's hidden-payment leftover allocation. Ties by arrival.
    """

    time_dependent = True  # a waiting job's ρ grows with time

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        fairness_knob: float = Field(default=0.8, ge=0.0, le=1.0)

    def __init__(self, params: Params | None = None) -> None:
        self.fairness_knob = (params or self.Params()).fairness_knob

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        now = snapshot.now
        by_rho = sorted(jobs, key=lambda j: (-finish_time_fairness(j, now), j.submit_time, j.id))
        if not by_rho:
            return Schedule(by_rho)
        n_eligible = max(1, math.ceil((1.0 - self.fairness_knob) * len(by_rho) - 1e-9))
        eligible, rest = by_rho[:n_eligible], by_rho[n_eligible:]
        # Stable sort: equal bids keep the highest-ρ-first order.
        eligible.sort(key=lambda j: isolated_time(j, now) * j.num_gpus)
        return Schedule(eligible + rest)
